// The http_req example service (docs/SDK_GUIDE.md): subscribes cpp.xml/get and
// answers <http_test><value>N</value></http_test> for an integer "value" in
// the key/value request body, or an error element otherwise. Runs
// CUMULO_THREAD_COUNT instances, one per thread.
#include "cumulo.hpp"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

namespace {

// Optional sign, then one or more decimal digits, within int64_t.
std::optional<int64_t> parse_int64(std::string_view text) {
    bool negative = false;
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
        negative = text[0] == '-';
        text.remove_prefix(1);
    }
    if (text.empty()) return std::nullopt;
    for (char c : text)
        if (c < '0' || c > '9') return std::nullopt;
    // Parse with the sign so that -9223372036854775808 fits.
    std::string digits = (negative ? "-" : "") + std::string(text);
    int64_t value = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
}

cumulo::Response handle_get(cumulo::Api&, const cumulo::Request& request) {
    static const std::string content_type = cumulo::info_encode({{"content-type", "text/xml; charset=utf-8"}});
    std::optional<int64_t> number;
    try {
        if (auto value = cumulo::info_find(request.request(), "value")) number = parse_int64(*value);
    } catch (const cumulo::Error&) {
        // malformed key/value bytes: answered like a missing value
    }
    if (number)
        return {content_type, "<http_test><value>" + std::to_string(*number) + "</value></http_test>"};
    return {content_type, "<http_test><error>no value specified</error></http_test>"};
}

// HTTP_REQ_WINDOW: requests the core may deliver at once; unset or empty is
// 1, anything but a positive integer (decimal digits, at most 2^32-1) stops
// the process.
std::uint32_t window_from_env() {
    const char* w = std::getenv("HTTP_REQ_WINDOW");
    if (!w || !*w) return 1;
    std::string_view text(w);
    std::uint32_t n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1 || text.front() < '0' || text.front() > '9') {
        std::cerr << "http_req: HTTP_REQ_WINDOW='" << text << "' is not a positive integer\n";
        std::exit(2);
    }
    return n;
}

}  // namespace

int main() {
    try {
        cumulo::Config config;
        config.window = window_from_env();
        cumulo::run([](cumulo::Api& api) { api.subscribe("cpp.xml/get", handle_get); }, 0, config);
    } catch (const std::exception& e) {
        std::cerr << "http_req: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
