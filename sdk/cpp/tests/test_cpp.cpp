// Tests of the C++ wrapper against a scripted fake core over real sockets.
// Each test is one CTest case: `test_cpp NAME`.
#include "cumulo.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<int> failures{0};

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

// Runs a statement that must throw cumulo::Error with the given status.
#define CHECK_THROWS_STATUS(stmt, want, ...)                                          \
    do {                                                                              \
        bool thrown_ = false;                                                         \
        try {                                                                         \
            stmt;                                                                     \
        } catch (const cumulo::Error& e) {                                            \
            thrown_ = true;                                                           \
            if (e.status() != (want)) {                                               \
                std::fprintf(stderr, "%s:%d: %s threw %s (%s), expected status %d\n",  \
                             __FILE__, __LINE__, #stmt, e.name(), e.what(), (want));   \
                failures++;                                                           \
            }                                                                         \
            __VA_ARGS__;                                                              \
        }                                                                             \
        if (!thrown_) {                                                               \
            std::fprintf(stderr, "%s:%d: %s did not throw\n", __FILE__, __LINE__, #stmt); \
            failures++;                                                               \
        }                                                                             \
    } while (0)

std::string_view sv(cumulo_str s) { return {s.data, s.len}; }
std::string_view sv(cumulo_bytes b) { return {reinterpret_cast<const char*>(b.data), b.len}; }
cumulo_str cs(std::string_view s) { return {s.data(), s.size()}; }
cumulo_bytes cb(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// The core's side of one connection, using the C library's codec.
class FakeCore {
public:
    explicit FakeCore(int fd) : fd_(fd) {}
    ~FakeCore() {
        if (fd_ >= 0) ::close(fd_);
    }

    // Reads one frame; false on EOF, error or 10 s of silence.
    bool read(cumulo_frame& frame) {
        buf_.clear();
        if (!read_exact(4)) return false;
        size_t frame_len = 0;
        if (cumulo_frame_header(buf_.data(), 4, CUMULO_DEFAULT_MAX_FRAME, &frame_len) != CUMULO_OK)
            return false;
        if (!read_exact(frame_len - 4)) return false;
        return cumulo_frame_decode(buf_.data(), frame_len, CUMULO_DEFAULT_MAX_FRAME, &frame) ==
               CUMULO_OK;
    }

    bool expect(uint8_t type, cumulo_frame& frame) {
        bool ok = read(frame) && frame.type == type;
        if (!ok) {
            std::fprintf(stderr, "fake core: expected frame 0x%02x\n", type);
            failures++;
        }
        return ok;
    }

    // True once the peer has closed (a GOODBYE may come first).
    bool eof() {
        cumulo_frame frame;
        while (read(frame))
            if (frame.type != CUMULO_FRAME_GOODBYE) return false;
        return true;
    }

    void send(const cumulo_frame& frame) {
        std::vector<uint8_t> out(cumulo_frame_size(&frame));
        size_t written = 0;
        CHECK(!out.empty() && cumulo_frame_encode(&frame, out.data(), out.size(), &written) == CUMULO_OK);
        const uint8_t* p = out.data();
        size_t left = written;
        while (left) {
            ssize_t n = ::send(fd_, p, left, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                failures++;
                return;
            }
            p += n;
            left -= static_cast<size_t>(n);
        }
    }

    void handshake(std::string_view prefix) {
        cumulo_frame hello;
        expect(CUMULO_FRAME_HELLO, hello);
        welcome(prefix);
    }

    void welcome(std::string_view prefix) {
        cumulo_frame w{};
        w.type = CUMULO_FRAME_WELCOME;
        w.u.welcome.version = 1;
        w.u.welcome.node_id = 5;
        w.u.welcome.instance_id = 6;
        w.u.welcome.process_count = 1;
        w.u.welcome.thread_count = 1;
        w.u.welcome.window = 1;
        w.u.welcome.max_frame = CUMULO_DEFAULT_MAX_FRAME;
        w.u.welcome.timeout_async = 4000;
        w.u.welcome.timeout_sync = 5000;
        w.u.welcome.timeout_terminate = 1000;
        w.u.welcome.keepalive = 5000;
        w.u.welcome.prefix = cs(prefix);
        send(w);
    }

    void reply_next_control() {
        cumulo_frame f;
        if (!read(f) || f.type < CUMULO_FRAME_SUBSCRIBE || f.type > CUMULO_FRAME_SUBSCRIBE_COUNT) {
            failures++;
            return;
        }
        cumulo_frame r{};
        r.type = CUMULO_FRAME_REPLY;
        r.u.reply.req_id = f.u.control.req_id;
        r.u.reply.message = cs("");
        send(r);
    }

    void request(const cumulo_trans_id& tid, std::string_view pattern, std::string_view body,
                 std::string_view info = "") {
        cumulo_frame f{};
        f.type = CUMULO_FRAME_REQUEST;
        f.u.request.trans_id = tid;
        f.u.request.timeout = 2000;
        f.u.request.flags = CUMULO_REQUEST_SYNC;
        f.u.request.name = cs(pattern);
        f.u.request.pattern = cs(pattern);
        f.u.request.request_info = cb(info);
        f.u.request.request = cb(body);
        send(f);
    }

    void response(const cumulo_trans_id& tid, uint16_t status, std::string_view info,
                  std::string_view body) {
        cumulo_frame f{};
        f.type = CUMULO_FRAME_RESPONSE;
        f.u.answer.trans_id = tid;
        f.u.answer.status = status;
        f.u.answer.response_info = cb(info);
        f.u.answer.response = cb(body);
        send(f);
    }

    void terminate() {
        cumulo_frame f{};
        f.type = CUMULO_FRAME_TERMINATE;
        f.u.terminate.timeout = 1000;
        send(f);
    }

private:
    bool read_exact(size_t n) {
        size_t start = buf_.size();
        buf_.resize(start + n);
        size_t got = 0;
        while (got < n) {
            pollfd p{fd_, POLLIN, 0};
            int ready = ::poll(&p, 1, 10000);
            if (ready == 0) return false;
            if (ready < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            ssize_t r = ::recv(fd_, buf_.data() + start + got, n - got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false;
            got += static_cast<size_t>(r);
        }
        return true;
    }

    int fd_;
    std::vector<uint8_t> buf_;
};

cumulo_trans_id core_tid(uint8_t seed) {
    cumulo_trans_id id{};
    for (int i = 0; i < 12; i++) id.bytes[i] = static_cast<uint8_t>(seed + i);
    return id;
}

// A Unix socket in a fresh temp folder; the fake core runs in a thread.
class Listener {
public:
    Listener() {
        char tmpl[] = "/tmp/cumulo-cpp-test-XXXXXX";
        dir_ = mkdtemp(tmpl);
        path_ = dir_ + "/cumulo.sock";
        fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
        CHECK(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        CHECK(::listen(fd_, 8) == 0);
    }
    ~Listener() {
        ::close(fd_);
        ::unlink(path_.c_str());
        ::rmdir(dir_.c_str());
    }
    int accept() { return ::accept(fd_, nullptr, nullptr); }
    const std::string& path() const { return path_; }

private:
    std::string dir_, path_;
    int fd_;
};

// Runs script as the core of one connection while body runs as the instance.
void with_core(const std::function<void(FakeCore&)>& script,
               const std::function<void(const std::string& socket)>& body) {
    Listener listener;
    std::thread core([&] {
        FakeCore fc(listener.accept());
        script(fc);
    });
    body(listener.path());
    core.join();
}

// ---------------------------------------------------------------- tests

void test_kv() {
    std::string info = cumulo::info_encode({{"content-type", "text/xml"}, {"a", ""}, {"a", "2"}});
    CHECK(info == std::string("content-type\0text/xml\0a\0\0a\0002\0", 29));
    auto pairs = cumulo::info_parse(info);
    CHECK(pairs.size() == 3);
    CHECK(pairs.size() == 3 && pairs[0].first == "content-type" && pairs[2].second == "2");
    CHECK(cumulo::info_find(info, "a") == std::optional<std::string_view>(""));
    CHECK(!cumulo::info_find(info, "b"));
    std::vector<std::pair<std::string, std::string>> owned{{"k", "v"}};
    CHECK(cumulo::info_encode(owned) == std::string("k\0v\0", 4));
    CHECK_THROWS_STATUS(cumulo::info_parse(std::string_view("key\0value", 9)), CUMULO_MALFORMED);
    CHECK_THROWS_STATUS(cumulo::info_find(std::string_view("odd\0", 4), "odd"), CUMULO_MALFORMED);
    CHECK_THROWS_STATUS(cumulo::info_encode({{std::string_view("a\0b", 3), "v"}}),
                        CUMULO_INVALID_ARGUMENT);
}

void test_status() {
    CHECK(cumulo::status::unavailable == 13);
    CHECK(std::strcmp(cumulo::Error(cumulo::status::unavailable, "starting").name(), "UNAVAILABLE") == 0);
    CHECK(std::strcmp(cumulo::Error(cumulo::status::protocol, "").name(), "PROTOCOL") == 0);
    CHECK(std::strcmp(cumulo::Error(14, "").name(), "UNKNOWN") == 0);
}

void test_connect_refused() {
    with_core(
        [](FakeCore& fc) {
            cumulo_frame f;
            fc.expect(CUMULO_FRAME_HELLO, f);
            cumulo_frame e{};
            e.type = CUMULO_FRAME_ERROR;
            e.u.error.status = CUMULO_UNAUTHORIZED;
            e.u.error.message = cs("unmanaged instances are refused");
            fc.send(e);
            CHECK(fc.eof());
        },
        [](const std::string& socket) {
            CHECK_THROWS_STATUS(cumulo::Api::unmanaged(socket, "/p/"), CUMULO_UNAUTHORIZED,
                                CHECK(std::string(e.what()).find("refused") != std::string::npos));
        });
}

// The TLS options reach the C SDK, which checks them before connecting
// (nothing listens at the address).
void test_tls_options() {
    cumulo::Config config;
    config.socket = "tcp://127.0.0.1:1";
    config.token = "";
    config.prefix = "/p/";
    config.tls_ca = "/nonexistent/ca.pem";
    CHECK_THROWS_STATUS(cumulo::Api{config}, CUMULO_E_CONFIG,
                        CHECK(std::string(e.what()).find("/nonexistent/ca.pem") != std::string::npos));
    config.tls_cert = "/nonexistent/client.pem";
    CHECK_THROWS_STATUS(cumulo::Api{config}, CUMULO_E_CONFIG,
                        CHECK(std::string(e.what()).find("CUMULO_TLS_KEY") != std::string::npos));
}

void test_handlers() {
    with_core(
        [](FakeCore& fc) {
            fc.handshake("/p/");
            fc.reply_next_control();  // echo/*
            fc.reply_next_control();  // throws
            fc.reply_next_control();  // fwd
            cumulo_frame f;
            fc.request(core_tid(1), "/p/echo/*", std::string_view("value\0007\0", 8));
            if (fc.expect(CUMULO_FRAME_RETURN, f)) {
                CHECK(f.u.answer.status == CUMULO_OK);
                CHECK(sv(f.u.answer.response_info) == std::string_view("n\0001\0", 4));
                CHECK(sv(f.u.answer.response) == "value=7 sync=1");
            }
            fc.request(core_tid(2), "/p/throws", "");
            if (fc.expect(CUMULO_FRAME_RETURN, f)) {
                CHECK(f.u.answer.status == CUMULO_SERVICE_ERROR);
                std::string message(sv(f.u.answer.response));
                CHECK(message.find("std::invalid_argument") != std::string::npos);
                CHECK(message.find("no value here") != std::string::npos);
                CHECK(message.find("/p/throws") != std::string::npos);
            }
            fc.request(core_tid(3), "/p/fwd", "payload");
            if (fc.expect(CUMULO_FRAME_FORWARD, f)) {
                cumulo_trans_id want = core_tid(3);
                CHECK(cumulo_trans_id_equal(&f.u.send.trans_id, &want));
                CHECK(sv(f.u.send.name) == "/elsewhere");
                CHECK(sv(f.u.send.request) == "payload!");
            }
            fc.terminate();
            CHECK(fc.eof());  // no RETURN after the FORWARD
        },
        [](const std::string& socket) {
            cumulo::Api api = cumulo::Api::unmanaged(socket, "/p/");
            int calls = 0;
            api.subscribe("echo/*", [&calls](cumulo::Api&, const cumulo::Request& req) {
                calls++;
                auto value = cumulo::info_find(req.request(), "value");
                std::string body = "value=" + std::string(value.value_or("?")) +
                                   " sync=" + (req.sync() ? "1" : "0");
                return cumulo::Response(cumulo::info_encode({{"n", "1"}}), body);
            });
            api.subscribe("throws", [](cumulo::Api&, const cumulo::Request&) -> cumulo::Response {
                throw std::invalid_argument("no value here");
            });
            api.subscribe("fwd", [](cumulo::Api& self, const cumulo::Request& req) {
                self.forward(req, "/elsewhere", std::string(req.request()) + "!");
                return cumulo::Response();
            });
            // The Api may move: handlers still get the live object.
            cumulo::Api moved = std::move(api);
            CHECK(moved.prefix() == "/p/");
            CHECK(!moved.poll(10000));
            CHECK(calls == 1);
        });
}

void test_sends() {
    with_core(
        [](FakeCore& fc) {
            fc.handshake("/p/");
            cumulo_frame f;
            cumulo_trans_id async_tid{}, sync_tid{};
            if (fc.expect(CUMULO_FRAME_SEND_ASYNC, f)) {
                async_tid = f.u.send.trans_id;
                CHECK(f.u.send.timeout == 4000);
                CHECK(f.u.send.priority == 3);
                CHECK(sv(f.u.send.request_info) == "ri");
            }
            if (fc.expect(CUMULO_FRAME_SEND_SYNC, f)) {
                sync_tid = f.u.send.trans_id;
                CHECK(f.u.send.flags == CUMULO_SEND_WAIT_FOR_SERVICE);
            }
            fc.response(async_tid, CUMULO_TIMEOUT, "", "timed out");
            fc.response(sync_tid, CUMULO_OK, "i", "sync body");
            if (fc.expect(CUMULO_FRAME_SEND_SYNC, f))
                fc.response(f.u.send.trans_id, CUMULO_NO_SERVICE, "", "no service subscribes /x");
            if (fc.expect(CUMULO_FRAME_MCAST_ASYNC, f)) {
                cumulo_trans_id ids[1] = {core_tid(9)};
                cumulo_frame sent{};
                sent.type = CUMULO_FRAME_MCAST_SENT;
                sent.u.mcast_sent.trans_id = f.u.send.trans_id;
                sent.u.mcast_sent.count = 1;
                sent.u.mcast_sent.trans_ids = ids[0].bytes;
                fc.send(sent);
            }
            CHECK(fc.eof());
        },
        [](const std::string& socket) {
            cumulo::Api api = cumulo::Api::unmanaged(socket, "/p/");
            cumulo::SendOptions options;
            options.request_info = "ri";
            options.priority = 3;
            cumulo::TransId async_tid = api.send_async("/svc/a", "a", options);
            cumulo::SendOptions wait;
            wait.wait_for_service = true;
            cumulo::Response r = api.send_sync("/svc/b", "b", wait);
            CHECK(r.info == "i" && r.body == "sync body");
            CHECK_THROWS_STATUS(api.send_sync("/x", ""), CUMULO_NO_SERVICE,
                                CHECK(std::string(e.what()).find("/x") != std::string::npos));
            auto collected = api.recv_async(async_tid, 0);
            CHECK(collected && collected->trans_id == async_tid);
            CHECK(collected && collected->status == CUMULO_TIMEOUT && !collected->ok());
            CHECK(collected && collected->body == "timed out");
            CHECK(!api.recv_async(std::nullopt, 0));
            auto ids = api.mcast_async("/svc/*", "m");
            CHECK(ids.size() == 1 && ids[0] == cumulo::TransId(core_tid(9)));
        });
}

// PROTOCOL.md 5.1: a handler's outgoing calls inherit the trace context of
// its request (the C library adds it; this checks it through the wrapper).
void test_trace() {
    const std::string tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const std::string ts = "congo=t61rcWkgMzE";
    const std::string trace = cumulo::info_encode({{"traceparent", tp}, {"tracestate", ts}});
    const std::string given = cumulo::info_encode({{"a", "b"}});
    with_core(
        [&](FakeCore& fc) {
            fc.handshake("/p/");
            fc.reply_next_control();  // tr
            cumulo_frame f;
            // outside any handler: nothing added
            if (fc.expect(CUMULO_FRAME_SEND_ASYNC, f)) CHECK(sv(f.u.send.request_info).empty());
            const std::string traced = cumulo::info_encode({{"k", "v"}}) + trace;
            fc.request(core_tid(1), "/p/tr", "all", traced);
            if (fc.expect(CUMULO_FRAME_SEND_SYNC, f)) {
                CHECK(sv(f.u.send.request_info) == given + trace);
                fc.response(f.u.send.trans_id, CUMULO_OK, "", "");
            }
            if (fc.expect(CUMULO_FRAME_SEND_ASYNC, f)) CHECK(sv(f.u.send.request_info) == trace);
            if (fc.expect(CUMULO_FRAME_MCAST_ASYNC, f)) {
                CHECK(sv(f.u.send.request_info) == trace);
                cumulo_frame sent{};
                sent.type = CUMULO_FRAME_MCAST_SENT;
                sent.u.mcast_sent.trans_id = f.u.send.trans_id;
                fc.send(sent);
            }
            if (fc.expect(CUMULO_FRAME_SEND_ASYNC, f))  // the handler's own traceparent
                CHECK(sv(f.u.send.request_info) == cumulo::info_encode({{"traceparent", "mine"}}));
            if (fc.expect(CUMULO_FRAME_FORWARD, f)) CHECK(sv(f.u.send.request_info) == given + trace);
            // a handler that throws: its calls inherit, and its context ends with it
            fc.request(core_tid(2), "/p/tr", "throw", traced);
            if (fc.expect(CUMULO_FRAME_SEND_ASYNC, f)) CHECK(sv(f.u.send.request_info) == given + trace);
            if (fc.expect(CUMULO_FRAME_RETURN, f)) CHECK(f.u.answer.status == CUMULO_SERVICE_ERROR);
            // a request without traceparent: nothing added
            fc.request(core_tid(3), "/p/tr", "one", cumulo::info_encode({{"tracestate", ts}}));
            if (fc.expect(CUMULO_FRAME_SEND_ASYNC, f)) CHECK(sv(f.u.send.request_info) == given);
            if (fc.expect(CUMULO_FRAME_RETURN, f)) CHECK(f.u.answer.status == CUMULO_OK);
            fc.terminate();
            // after the handlers: nothing added
            if (fc.expect(CUMULO_FRAME_SEND_ASYNC, f)) CHECK(sv(f.u.send.request_info).empty());
            CHECK(fc.eof());
        },
        [&](const std::string& socket) {
            cumulo::Api api = cumulo::Api::unmanaged(socket, "/p/");
            int calls = 0;
            api.subscribe("tr", [&](cumulo::Api& self, const cumulo::Request& req) {
                calls++;
                cumulo::SendOptions options;
                options.request_info = given;
                if (req.request() == "all") {
                    self.send_sync("/svc/sync", "", options);
                    self.send_async("/svc/async", "");
                    self.mcast_async("/svc/*", "");
                    std::string own = cumulo::info_encode({{"traceparent", "mine"}});
                    cumulo::SendOptions own_options;
                    own_options.request_info = own;
                    self.send_async("/svc/own", "", own_options);
                    self.forward(req, "/svc/fwd", "", options);
                    return cumulo::Response();
                }
                self.send_async("/svc/one", "", options);
                if (req.request() == "throw") throw std::runtime_error("traced failure");
                return cumulo::Response();
            });
            api.send_async("/svc/before", "");
            CHECK(!api.poll(10000));
            CHECK(calls == 3);
            api.send_async("/svc/after", "");
        });
}

void test_run() {
    Listener listener;
    constexpr int threads = 2;
    std::thread process([&] {
        cumulo::Config config;
        config.socket = listener.path();
        config.token = "";
        config.prefix = "/r/";
        cumulo::run(
            [](cumulo::Api& api) {
                api.subscribe("get", [](cumulo::Api& self, const cumulo::Request&) {
                    return cumulo::Response("thread " + std::to_string(self.thread_index()));
                });
            },
            threads, config);
    });
    std::vector<std::unique_ptr<FakeCore>> cores;
    std::set<uint32_t> indexes;
    for (int i = 0; i < threads; i++) {
        cores.push_back(std::make_unique<FakeCore>(listener.accept()));
        cumulo_frame f;
        if (cores.back()->expect(CUMULO_FRAME_HELLO, f)) indexes.insert(f.u.hello.thread_index);
        cores.back()->welcome("/r/");
        cores.back()->reply_next_control();
    }
    CHECK((indexes == std::set<uint32_t>{0, 1}));
    std::set<std::string> bodies;
    for (auto& fc : cores) {
        fc->request(core_tid(7), "/r/get", "");
        cumulo_frame f;
        if (fc->expect(CUMULO_FRAME_RETURN, f)) bodies.insert(std::string(sv(f.u.answer.response)));
        fc->terminate();
        CHECK(fc->eof());
    }
    CHECK((bodies == std::set<std::string>{"thread 0", "thread 1"}));
    process.join();
}

struct TestCase {
    const char* name;
    void (*run)();
};

const TestCase TESTS[] = {
    {"kv", test_kv},
    {"status", test_status},
    {"connect_refused", test_connect_refused},
    {"tls_options", test_tls_options},
    {"handlers", test_handlers},
    {"sends", test_sends},
    {"trace", test_trace},
    {"run", test_run},
};

}  // namespace

int main(int argc, char** argv) {
    int ran = 0;
    for (const auto& t : TESTS) {
        if (argc > 1 && std::strcmp(argv[1], t.name) != 0) continue;
        t.run();
        ran++;
    }
    if (!ran) {
        std::fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    if (failures) {
        std::fprintf(stderr, "%d check(s) failed\n", failures.load());
        return 1;
    }
    std::printf("all checks passed\n");
    return 0;
}
