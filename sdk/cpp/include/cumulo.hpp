// cumulo C++ SDK: a thin RAII wrapper over the C library (cumulo.h).
//
// Errors are exceptions: every failing call throws cumulo::Error, which
// carries the protocol status code (status(), name()) and the core's message
// (what()). Handlers may throw anything: the instance answers the request
// with SERVICE_ERROR (7) and a message naming the exception, then keeps
// serving. recv_async is the exception to the rule: a collected response with
// an error status is data (AsyncResponse::status), not an exception, so that
// responses of many requests can be drained in a loop.
//
// Threading: an Api object is one instance (one connection) and belongs to
// one thread; never share it. cumulo::run starts one thread per instance.
#ifndef CUMULO_HPP
#define CUMULO_HPP

#include "cumulo.h"

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <typeinfo>
#include <utility>
#include <vector>

#if defined(__has_include)
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define CUMULO_HPP_DEMANGLE 1
#endif
#endif

namespace cumulo {

// Protocol status codes (PROTOCOL.md 2.3) and the SDK's own negative ones.
namespace status {
inline constexpr int ok = CUMULO_OK;
inline constexpr int timeout = CUMULO_TIMEOUT;
inline constexpr int no_service = CUMULO_NO_SERVICE;
inline constexpr int queue_full = CUMULO_QUEUE_FULL;
inline constexpr int crashed = CUMULO_CRASHED;
inline constexpr int malformed = CUMULO_MALFORMED;
inline constexpr int shutting_down = CUMULO_SHUTTING_DOWN;
inline constexpr int service_error = CUMULO_SERVICE_ERROR;
inline constexpr int too_large = CUMULO_TOO_LARGE;
inline constexpr int invalid_argument = CUMULO_INVALID_ARGUMENT;
inline constexpr int unsupported_version = CUMULO_UNSUPPORTED_VERSION;
inline constexpr int unauthorized = CUMULO_UNAUTHORIZED;
inline constexpr int protocol = CUMULO_PROTOCOL;
inline constexpr int unavailable = CUMULO_UNAVAILABLE;
inline constexpr int io = CUMULO_E_IO;
inline constexpr int closed = CUMULO_E_CLOSED;
inline constexpr int config = CUMULO_E_CONFIG;
}  // namespace status

class Error : public std::runtime_error {
public:
    Error(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
    int status() const noexcept { return status_; }
    const char* name() const noexcept { return cumulo_status_name(status_); }

private:
    int status_;
};

class TransId {
public:
    TransId() = default;
    explicit TransId(const cumulo_trans_id& id) : id_(id) {}
    const cumulo_trans_id& raw() const noexcept { return id_; }
    std::string hex() const {
        char text[33];
        cumulo_trans_id_hex(&id_, text);
        return text;
    }
    friend bool operator==(const TransId& a, const TransId& b) {
        return cumulo_trans_id_equal(&a.id_, &b.id_);
    }
    friend bool operator!=(const TransId& a, const TransId& b) { return !(a == b); }

private:
    cumulo_trans_id id_{};
};

// ----------------------------------------------------------- key/value

using Pair = std::pair<std::string_view, std::string_view>;

// key\0value\0... ; throws Error(INVALID_ARGUMENT) for a NUL inside a key or value.
template <class Pairs>
std::string info_encode(const Pairs& pairs) {
    std::vector<cumulo_kv> kvs;
    for (const auto& [key, value] : pairs) {
        std::string_view k(key), v(value);
        kvs.push_back({{reinterpret_cast<const uint8_t*>(k.data()), k.size()},
                       {reinterpret_cast<const uint8_t*>(v.data()), v.size()}});
    }
    size_t needed = 0;
    int rc = cumulo_kv_encode(kvs.data(), kvs.size(), nullptr, 0, &needed);
    if (rc != CUMULO_OK && rc != CUMULO_TOO_LARGE)
        throw Error(rc, "a key or value holds a NUL byte");
    std::string out(needed, '\0');
    rc = cumulo_kv_encode(kvs.data(), kvs.size(), reinterpret_cast<uint8_t*>(out.data()),
                          out.size(), &needed);
    if (rc != CUMULO_OK) throw Error(rc, "cannot encode key/value pairs");
    return out;
}

inline std::string info_encode(std::initializer_list<Pair> pairs) {
    return info_encode<std::initializer_list<Pair>>(pairs);
}

// Pairs in order; the views point into `info`. Throws Error(MALFORMED).
inline std::vector<Pair> info_parse(std::string_view info) {
    const auto* data = reinterpret_cast<const uint8_t*>(info.data());
    if (cumulo_kv_validate(data, info.size(), nullptr) != CUMULO_OK)
        throw Error(CUMULO_MALFORMED, "malformed key/value buffer");
    std::vector<Pair> pairs;
    size_t offset = 0;
    cumulo_kv kv;
    while (cumulo_kv_next(data, info.size(), &offset, &kv))
        pairs.emplace_back(std::string_view(reinterpret_cast<const char*>(kv.key.data), kv.key.len),
                           std::string_view(reinterpret_cast<const char*>(kv.value.data), kv.value.len));
    return pairs;
}

// First value of key, if any. Throws Error(MALFORMED).
inline std::optional<std::string_view> info_find(std::string_view info, std::string_view key) {
    cumulo_bytes value;
    bool found = false;
    int rc = cumulo_kv_find(reinterpret_cast<const uint8_t*>(info.data()), info.size(), key.data(),
                            key.size(), &value, &found);
    if (rc != CUMULO_OK) throw Error(rc, "malformed key/value buffer");
    if (!found) return std::nullopt;
    return std::string_view(reinterpret_cast<const char*>(value.data), value.len);
}

// -------------------------------------------------------------- values

inline std::string_view view(cumulo_str s) { return {s.data, s.len}; }
inline std::string_view view(cumulo_bytes b) {
    return {reinterpret_cast<const char*>(b.data), b.len};
}

// A request given to a handler; valid only while the handler runs.
class Request {
public:
    explicit Request(const cumulo_request* req) : req_(req) {}
    TransId trans_id() const { return TransId(req_->trans_id); }
    std::string_view name() const { return view(req_->name); }
    std::string_view pattern() const { return view(req_->pattern); }
    std::string_view request_info() const { return view(req_->request_info); }
    std::string_view request() const { return view(req_->request); }
    uint32_t timeout() const { return req_->timeout; }
    int8_t priority() const { return req_->priority; }
    uint64_t source() const { return req_->source; }
    bool sync() const { return req_->flags & CUMULO_REQUEST_SYNC; }
    bool mcast() const { return req_->flags & CUMULO_REQUEST_MCAST; }
    const cumulo_request* raw() const { return req_; }

private:
    const cumulo_request* req_;
};

// What a handler returns, and what send_sync gives back.
struct Response {
    std::string info;
    std::string body;
    Response() = default;
    Response(std::string body_) : body(std::move(body_)) {}
    Response(const char* body_) : body(body_) {}
    Response(std::string info_, std::string body_) : info(std::move(info_)), body(std::move(body_)) {}
};

// A collected asynchronous response; status != 0 means body is the error text.
struct AsyncResponse {
    TransId trans_id;
    int status = 0;
    std::string info;
    std::string body;
    bool ok() const { return status == CUMULO_OK; }
};

struct SendOptions {
    std::string_view request_info;
    uint32_t timeout = 0;            // ms; 0 = the default from WELCOME
    std::optional<int8_t> priority;  // none = priority_default (forward: the request's)
    bool wait_for_service = false;
};

struct Config {
    std::optional<std::string> socket;  // none = CUMULO_SOCKET
    std::optional<std::string> token;   // none = CUMULO_TOKEN; "" = unmanaged
    std::optional<std::string> prefix;  // none = CUMULO_PREFIX (unmanaged only)
    uint32_t thread_index = 0;
    uint32_t window = 0;                // 0 = 1
    // TLS to a tcp:// address (the C SDK's, see its README): none = the
    // environment (CUMULO_TLS_CA, CUMULO_TLS_CERT, CUMULO_TLS_KEY); tls_ca ""
    // turns TLS off. PEM files; a client certificate needs cert and key.
    std::optional<std::string> tls_ca;
    std::optional<std::string> tls_cert;
    std::optional<std::string> tls_key;
};

class Api;
using Handler = std::function<Response(Api&, const Request&)>;

// --------------------------------------------------------------- Api

class Api {
public:
    // Connects with settings from the environment (a process the core started).
    explicit Api(uint32_t thread_index = 0) {
        Config config;
        config.thread_index = thread_index;
        connect(config);
    }
    explicit Api(const Config& config) { connect(config); }

    static Api unmanaged(std::string_view socket, std::string_view prefix,
                         uint32_t thread_index = 0) {
        Config config;
        config.socket = std::string(socket);
        config.token = "";
        config.prefix = std::string(prefix);
        config.thread_index = thread_index;
        return Api(config);
    }

    Api(Api&& other) noexcept : state_(std::move(other.state_)) {
        if (state_) state_->owner = this;
    }
    Api& operator=(Api&& other) noexcept {
        if (this != &other) {
            close();
            state_ = std::move(other.state_);
            if (state_) state_->owner = this;
        }
        return *this;
    }
    Api(const Api&) = delete;
    Api& operator=(const Api&) = delete;
    ~Api() { close(); }

    // Sends GOODBYE and closes; also done by the destructor.
    void close() noexcept {
        if (state_ && state_->api) {
            cumulo_destroy(state_->api);
            state_->api = nullptr;
        }
    }

    void subscribe(std::string_view pattern, Handler handler) {
        auto entry = std::make_unique<Entry>(Entry{state_.get(), std::move(handler)});
        Entry* raw = entry.get();
        check(cumulo_subscribe(handle(), cstr(pattern), &Api::trampoline, raw));
        // The C side now points at raw; keep it alive for as long as the instance.
        state_->handlers[std::string(pattern)].push_back(std::move(entry));
    }
    void unsubscribe(std::string_view pattern) { check(cumulo_unsubscribe(handle(), cstr(pattern))); }
    uint32_t subscribe_count(std::string_view pattern) {
        uint32_t count = 0;
        check(cumulo_subscribe_count(handle(), cstr(pattern), &count));
        return count;
    }

    TransId send_async(std::string_view name, std::string_view request,
                       const SendOptions& options = {}) {
        cumulo_send_options raw = to_c(options);
        cumulo_trans_id tid;
        check(cumulo_send_async(handle(), cstr(name), request.data(), request.size(), &raw, &tid));
        return TransId(tid);
    }

    // Throws Error carrying the response's status when it is not OK.
    Response send_sync(std::string_view name, std::string_view request,
                       const SendOptions& options = {}) {
        cumulo_send_options raw = to_c(options);
        cumulo_response response;
        check(cumulo_send_sync(handle(), cstr(name), request.data(), request.size(), &raw, &response));
        return Response(std::string(view(response.response_info)),
                        std::string(view(response.response)));
    }

    std::vector<TransId> mcast_async(std::string_view name, std::string_view request,
                                     const SendOptions& options = {}) {
        cumulo_send_options raw = to_c(options);
        const cumulo_trans_id* ids = nullptr;
        size_t count = 0;
        check(cumulo_mcast_async(handle(), cstr(name), request.data(), request.size(), &raw, &ids,
                                 &count));
        return std::vector<TransId>(ids, ids + count);
    }

    // The response of trans_id (or of any kept async request), or nullopt if
    // none arrived within timeout_ms (-1 = no limit).
    std::optional<AsyncResponse> recv_async(std::optional<TransId> trans_id = std::nullopt,
                                            int timeout_ms = -1) {
        cumulo_response response;
        int rc = cumulo_recv_async(handle(), trans_id ? &trans_id->raw() : nullptr, timeout_ms,
                                   &response);
        if (rc == CUMULO_TIMEOUT) return std::nullopt;
        check(rc);
        return AsyncResponse{TransId(response.trans_id), response.status,
                             std::string(view(response.response_info)),
                             std::string(view(response.response))};
    }

    // From within a handler: pass the request on; the handler's return value
    // is then ignored.
    void forward(const Request& request, std::string_view name, std::string_view request_bytes,
                 const SendOptions& options = {}) {
        cumulo_send_options raw = to_c(options);
        check(cumulo_forward(handle(), request.raw(), cstr(name), request_bytes.data(),
                             request_bytes.size(), &raw));
    }

    // Runs handlers for up to timeout_ms (-1 = until TERMINATE). Returns true
    // when the time is up, false once the core sent TERMINATE.
    bool poll(int timeout_ms = -1) {
        int rc = cumulo_poll(handle(), timeout_ms);
        if (rc == CUMULO_E_TERMINATED) return false;
        check(rc);
        return true;
    }

    uint32_t process_index() const { return cumulo_process_index(handle()); }
    uint32_t process_count() const { return cumulo_process_count(handle()); }
    uint32_t thread_count() const { return cumulo_thread_count(handle()); }
    uint32_t thread_index() const { return cumulo_thread_index(handle()); }
    std::string_view prefix() const { return view(cumulo_prefix(handle())); }
    uint32_t timeout_async() const { return cumulo_timeout_async(handle()); }
    uint32_t timeout_sync() const { return cumulo_timeout_sync(handle()); }
    uint32_t timeout_terminate() const { return cumulo_timeout_terminate(handle()); }
    int8_t priority_default() const { return cumulo_priority_default(handle()); }
    uint32_t node_id() const { return cumulo_node_id(handle()); }
    uint32_t instance_id() const { return cumulo_instance_id(handle()); }
    uint32_t window() const { return cumulo_window(handle()); }
    uint32_t max_frame() const { return cumulo_max_frame(handle()); }
    uint32_t keepalive() const { return cumulo_keepalive(handle()); }

    cumulo_api* handle() const {
        if (!state_ || !state_->api) throw Error(CUMULO_E_CLOSED, "instance is closed");
        return state_->api;
    }

private:
    struct State;
    struct Entry {
        State* state;
        Handler handler;
    };
    // Heap state: the C library keeps pointers to entries, which must not move
    // when the Api object does.
    struct State {
        cumulo_api* api = nullptr;
        Api* owner = nullptr;
        std::string scratch;  // reused NUL-terminated copy of names and patterns
        std::map<std::string, std::vector<std::unique_ptr<Entry>>> handlers;
    };

    void connect(const Config& config) {
        state_ = std::make_unique<State>();
        state_->owner = this;
        cumulo_config raw{};
        raw.socket = config.socket ? config.socket->c_str() : nullptr;
        raw.token = config.token ? config.token->c_str() : nullptr;
        raw.prefix = config.prefix ? config.prefix->c_str() : nullptr;
        raw.thread_index = config.thread_index;
        raw.window = config.window;
        raw.tls_ca = config.tls_ca ? config.tls_ca->c_str() : nullptr;
        raw.tls_cert = config.tls_cert ? config.tls_cert->c_str() : nullptr;
        raw.tls_key = config.tls_key ? config.tls_key->c_str() : nullptr;
        char error[512] = "";
        int rc = cumulo_connect(&state_->api, &raw, error, sizeof error);
        if (rc != CUMULO_OK) throw Error(rc, error);
    }

    const char* cstr(std::string_view s) {
        state_->scratch.assign(s.data(), s.size());
        return state_->scratch.c_str();
    }

    void check(int rc) const {
        if (rc != CUMULO_OK) throw Error(rc, cumulo_error_message(state_->api));
    }

    static cumulo_send_options to_c(const SendOptions& options) {
        cumulo_send_options raw{};
        raw.request_info = {reinterpret_cast<const uint8_t*>(options.request_info.data()),
                            options.request_info.size()};
        raw.timeout = options.timeout;
        raw.has_priority = options.priority.has_value();
        raw.priority = options.priority.value_or(0);
        raw.flags = options.wait_for_service ? CUMULO_SEND_WAIT_FOR_SERVICE : 0;
        return raw;
    }

    static std::string exception_name(const std::type_info& type) {
#ifdef CUMULO_HPP_DEMANGLE
        int status = 0;
        char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
        if (name) {
            std::string text(name);
            std::free(name);
            return text;
        }
#endif
        return type.name();
    }

    // C callback: runs the std::function; exceptions never cross into C.
    static int trampoline(cumulo_api* api, const cumulo_request* raw, void* user_data) {
        auto* entry = static_cast<Entry*>(user_data);
        Request request(raw);
        std::string failure;
        try {
            Response response = entry->handler(*entry->state->owner, request);
            int rc = cumulo_return(api, raw, response.info.data(), response.info.size(),
                                   response.body.data(), response.body.size());
            return rc == CUMULO_E_STATE ? CUMULO_OK : rc;  // E_STATE: already forwarded
        } catch (const std::exception& e) {
            failure = exception_name(typeid(e)) + ": " + e.what();
        } catch (...) {
            failure = "unknown exception";
        }
        failure = "handler for '" + std::string(request.pattern()) + "' threw " + failure;
        return cumulo_return_error(api, raw, CUMULO_SERVICE_ERROR, failure.c_str());
    }

    std::unique_ptr<State> state_;
};

// ------------------------------------------------------------ run

// Runs a whole process: thread_count threads (0 = CUMULO_THREAD_COUNT, else
// 1), each with its own Api (thread_index = its number, other settings from
// config), calling setup, then polling until TERMINATE. Rethrows the first
// error of any thread after all have stopped.
inline void run(const std::function<void(Api&)>& setup, uint32_t thread_count = 0,
                const Config& config = {}) {
    if (thread_count == 0) {
        const char* env = std::getenv("CUMULO_THREAD_COUNT");
        thread_count = 1;
        if (env && *env) {
            char* end = nullptr;
            unsigned long n = std::strtoul(env, &end, 10);
            if (*end || n == 0 || n > 4096 || env[0] == '-')
                throw Error(CUMULO_E_CONFIG, std::string("CUMULO_THREAD_COUNT is not a count: ") + env);
            thread_count = static_cast<uint32_t>(n);
        }
    }
    std::mutex mutex;
    std::exception_ptr first_error;
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < thread_count; i++) {
        threads.emplace_back([&, i] {
            try {
                Config own = config;
                own.thread_index = i;
                Api api(own);
                setup(api);
                while (api.poll()) {
                }
            } catch (const std::exception& e) {
                std::cerr << "cumulo: thread " << i << ": " << e.what() << "\n";
                std::lock_guard<std::mutex> lock(mutex);
                if (!first_error) first_error = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    if (first_error) std::rethrow_exception(first_error);
}

}  // namespace cumulo

#endif  // CUMULO_HPP
