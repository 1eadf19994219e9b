// {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
// answers "hello from {{name}}", with the request's "value" parameter when it
// has one. Runs CUMULO_THREAD_COUNT instances, one per thread.
#include "cumulo.hpp"

#include <iostream>
#include <optional>
#include <string>

namespace {

cumulo::Response get(cumulo::Api&, const cumulo::Request& request) {
    static const std::string text = cumulo::info_encode({ {"content-type", "text/plain; charset=utf-8"} });
    std::optional<std::string_view> value;
    try {
        value = cumulo::info_find(request.request(), "value");
    } catch (const cumulo::Error&) {
        // malformed key/value bytes: answered as if there were no value
    }
    if (value) return {text, "hello from {{name}} (value " + std::string(*value) + ")"};
    return {text, "hello from {{name}}"};
}

}  // namespace

int main() {
    try {
        cumulo::run([](cumulo::Api& api) { api.subscribe("{{name}}/get", get); });
    } catch (const std::exception& e) {
        std::cerr << "{{name}}: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
