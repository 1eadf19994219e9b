// Unmanaged client: client SOCKET NAME HEX_BODY [sync|async]
//
// Prints the hex response_info, a newline and the response body; on an error
// status prints its name, a newline and the message, and exits 3.
#include "cumulo.hpp"

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

static std::optional<std::string> unhex(const std::string& hex) {
    if (hex.size() % 2) return std::nullopt;
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) {
        try {
            size_t used = 0;
            int v = std::stoi(hex.substr(i, 2), &used, 16);
            if (used != 2) return std::nullopt;
            out.push_back(static_cast<char>(v));
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }
    return out;
}

static void print(const std::string& info, const std::string& body) {
    for (unsigned char c : info) std::printf("%02x", c);
    std::printf("\n");
    std::fwrite(body.data(), 1, body.size(), stdout);
}

int main(int argc, char** argv) {
    std::optional<std::string> body = argc >= 4 ? unhex(argv[3]) : std::nullopt;
    if (!body) {
        std::cerr << "usage: " << argv[0] << " SOCKET NAME HEX_BODY [sync|async]\n";
        return 2;
    }
    bool async = argc > 4 && std::string(argv[4]) == "async";
    try {
        cumulo::Api api = cumulo::Api::unmanaged(argv[1], "/client/cpp/");
        if (!async) {
            cumulo::Response r = api.send_sync(argv[2], *body);
            print(r.info, r.body);
            return 0;
        }
        cumulo::TransId id = api.send_async(argv[2], *body);
        std::optional<cumulo::AsyncResponse> r = api.recv_async(id);
        if (!r) {
            std::cerr << "no answer\n";
            return 1;
        }
        if (!r->ok()) {
            std::printf("%s\n", cumulo_status_name(r->status));
            std::fwrite(r->body.data(), 1, r->body.size(), stdout);
            return 3;
        }
        print(r->info, r->body);
        return 0;
    } catch (const cumulo::Error& e) {
        if (e.status() <= 0) {  // the SDK's own errors: no connection, ...
            std::cerr << e.name() << ": " << e.what() << "\n";
            return 1;
        }
        std::printf("%s\n%s", e.name(), e.what());
        return 3;
    }
}
