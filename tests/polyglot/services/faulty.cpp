// Faulty service: /tests/faulty/cpp/boom throws, /ok answers "ok".
#include "cumulo.hpp"

#include <iostream>
#include <stdexcept>

int main() {
    try {
        cumulo::run([](cumulo::Api& api) {
            api.subscribe("boom", [](cumulo::Api&, const cumulo::Request&) -> cumulo::Response {
                throw std::runtime_error("boom from cpp");
            });
            api.subscribe("ok", [](cumulo::Api&, const cumulo::Request&) { return cumulo::Response{"", "ok"}; });
        });
    } catch (const std::exception& e) {
        std::cerr << "faulty: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
