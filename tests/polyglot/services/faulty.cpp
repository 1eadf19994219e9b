// Faulty service: /tests/faulty/cpp/boom throws, /ok answers "ok". The
// trace_* handlers call /echo/trace with an empty request_info and answer
// with the request_info the echo got (its response_info), to show the trace
// context they inherit (PROTOCOL.md 5.1); trace_forward forwards, and the
// echo answers.
#include "cumulo.hpp"

#include <iostream>
#include <stdexcept>

namespace {

constexpr const char* echo = "/echo/trace";

// The echo's response_info as the body.
cumulo::Response echoed(const std::optional<cumulo::AsyncResponse>& response) {
    if (!response) throw cumulo::Error(cumulo::status::timeout, "no response from /echo/trace");
    if (!response->ok()) throw cumulo::Error(response->status, response->body);
    return cumulo::Response{"", response->info};
}

}  // namespace

int main() {
    try {
        cumulo::run([](cumulo::Api& api) {
            api.subscribe("boom", [](cumulo::Api&, const cumulo::Request&) -> cumulo::Response {
                throw std::runtime_error("boom from cpp");
            });
            api.subscribe("ok", [](cumulo::Api&, const cumulo::Request&) { return cumulo::Response{"", "ok"}; });
            api.subscribe("trace_sync", [](cumulo::Api& self, const cumulo::Request&) {
                return cumulo::Response{"", self.send_sync(echo, "").info};
            });
            api.subscribe("trace_async", [](cumulo::Api& self, const cumulo::Request&) {
                return echoed(self.recv_async(self.send_async(echo, "")));
            });
            api.subscribe("trace_mcast", [](cumulo::Api& self, const cumulo::Request&) {
                auto ids = self.mcast_async(echo, "");
                if (ids.empty()) throw cumulo::Error(cumulo::status::no_service, "no copy of /echo/trace");
                return echoed(self.recv_async(ids[0]));
            });
            api.subscribe("trace_forward", [](cumulo::Api& self, const cumulo::Request& req) {
                self.forward(req, echo, req.request());
                return cumulo::Response();
            });
        });
    } catch (const std::exception& e) {
        std::cerr << "faulty: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
