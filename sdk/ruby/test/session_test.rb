# frozen_string_literal: true

require_relative "test_helper"
require "fake_core"

# The session logic against a fake core over a real Unix socket.
class SessionTest < Minitest::Test
  TID_A = ("\x18z+\e@\xFD\xCD\x15".b + [3, 1].pack("NN")).freeze
  TID_B = ("\x18z+\e@\xFD\xCD\x16".b + [3, 1].pack("NN")).freeze

  def request_fields(trans_id, pattern: "/t/echo", request: "hi", request_info: "")
    { trans_id: trans_id, timeout: 500, priority: 0, flags: 1, source: (3 << 32) | 1,
      name: pattern, pattern: pattern, request_info: request_info, request: request }
  end

  def connect(core, **options)
    Cumulo::API.new(0, socket: core.path, prefix: "/t/", **options)
  end

  def test_handshake_sends_hello_and_exposes_welcome
    hello = nil
    core = FakeCore.new do |c|
      peer, hello = c.accept_instance
      2.times { peer.expect(:send_async) }
    end
    api = Cumulo::API.new(2, socket: core.path, prefix: "/t/", window: 4)
    first = api.send_async("/x", "1")
    second = api.send_async("/x", "2")
    core.join

    assert_equal({ version: 1, window: 4, thread_index: 2, token: "", prefix: "/t/" }, hello)
    assert_equal [3, 9, 1, 2, 4], [api.node_id, api.instance_id, api.process_index, api.process_count,
                                   api.thread_count]
    assert_equal [700, 800, 900, -2, "/t/"], [api.timeout_async, api.timeout_sync, api.timeout_terminate,
                                              api.priority_default, api.prefix]
    assert_equal [3, 9].pack("NN"), first.byteslice(8, 8)
    assert_operator second, :>, first
  end

  def test_managed_hello_sends_the_token_and_no_prefix
    hello = nil
    core = FakeCore.new { |c| _, hello = c.accept_instance }
    Cumulo::API.new(1, socket: core.path, token: "c0ffee", prefix: "/ignored/")
    core.join
    assert_equal "c0ffee", hello[:token]
    assert_equal "", hello[:prefix]
  end

  def test_error_instead_of_welcome_raises_its_status
    core = FakeCore.new do |c|
      peer = c.accept
      peer.expect(:hello)
      peer.send_frame(:error, status: Cumulo::Status::UNAUTHORIZED, message: "unknown token")
    end
    error = assert_raises(Cumulo::UnauthorizedError) { Cumulo::API.new(0, socket: core.path, token: "bad") }
    core.join
    assert_equal 11, error.status
    assert_equal "unknown token", error.message
  end

  def test_unmanaged_instance_needs_a_prefix
    assert_raises(Cumulo::InvalidArgumentError) { Cumulo::API.new(0, socket: "/nonexistent", token: "") }
    assert_raises(Cumulo::ConnectionClosed) { Cumulo::API.new(0, socket: "/nonexistent/sock", prefix: "/t/") }
  end

  def test_subscribe_unsubscribe_and_count_use_replies
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.reply(:subscribe, "a/*")
      peer.reply(:subscribe_count, "a/*", value: 2)
      peer.reply(:unsubscribe, "zz", status: 9, message: "not subscribed")
    end
    api = connect(core)
    assert_nil(api.subscribe("a/*") { "x" })
    assert_equal 2, api.subscribe_count("a/*")
    error = assert_raises(Cumulo::InvalidArgumentError) { api.unsubscribe("zz") }
    core.join
    assert_equal "not subscribed", error.message
  end

  def test_request_is_handled_and_returned_then_terminate_ends_poll
    returned = nil
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.reply(:subscribe, "echo")
      peer.send_frame(:request, request_fields(TID_A, request_info: "a\0001\0"))
      returned = peer.expect(:return)
      peer.send_frame(:terminate, timeout: 100)
    end
    api = connect(core)
    seen = nil
    api.subscribe("echo") do |req|
      seen = req
      [{ "content-type" => "text/plain" }, "echo: #{req.request}"]
    end
    refute api.poll
    core.join

    assert api.terminated?
    assert_equal [TID_A, 0, "content-type\0text/plain\0", "echo: hi"],
                 returned.values_at(:trans_id, :status, :response_info, :response)
    assert seen.sync?
    refute seen.mcast?
    assert_equal [%w[a 1]], seen.info
    assert_equal (3 << 32) | 1, seen.source
  end

  def test_send_sync_answers_ping_and_keeps_other_frames_meanwhile
    pong = nil
    sync = nil
    queued_return = nil
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.reply(:subscribe, "echo")
      async_tid = peer.expect(:send_async)[:trans_id]
      sync = peer.expect(:send_sync)
      peer.send_frame(:ping, nonce: 77)
      pong = peer.expect(:pong) # answered before the sync answer exists
      peer.send_frame(:request, request_fields(TID_B))
      peer.send_frame(:response, trans_id: async_tid, status: 0, response_info: "", response: "async answer")
      peer.send_frame(:response, trans_id: sync[:trans_id], status: 0, response_info: "k\0v\0",
                                 response: "sync answer")
      queued_return = peer.expect(:return)
      peer.closed_by_instance?
    end
    api = connect(core)
    api.subscribe("echo") { |req| "handled #{req.request}" }
    async_tid = api.send_async("/other", "a")
    info, response = api.send_sync("/t/peer", "question", request_info: { "q" => "1" }, timeout: 3000)
    assert_equal ["k\0v\0", "sync answer"], [info, response]
    assert_equal Cumulo::Response.new(async_tid, "", "async answer"), api.recv_async(async_tid)
    assert api.poll(100), "poll returns true on timeout after serving the queued request"
    api.close
    core.join

    assert_equal({ nonce: 77 }, pong)
    assert_equal [3000, -2, 0, "/t/peer", "q\0001\0", "question"],
                 sync.values_at(:timeout, :priority, :flags, :name, :request_info, :request)
    assert_equal [TID_B, 0, "handled hi"], queued_return.values_at(:trans_id, :status, :response)
  end

  def test_send_sync_error_status_raises_with_code_and_message
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      tid = peer.expect(:send_sync)[:trans_id]
      peer.send_frame(:response, trans_id: tid, status: 2, response_info: "", response: "no service /nowhere")
    end
    api = connect(core)
    error = assert_raises(Cumulo::NoServiceError) { api.send_sync("/nowhere", "") }
    core.join
    assert_equal [2, "NO_SERVICE", "no service /nowhere"], [error.status, error.status_name, error.message]
  end

  def test_handler_exception_returns_service_error_and_keeps_serving
    failed = nil
    served = nil
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.reply(:subscribe, "echo")
      peer.send_frame(:request, request_fields(TID_A, request: "boom"))
      failed = peer.expect(:return)
      peer.send_frame(:request, request_fields(TID_B, request: "fine"))
      served = peer.expect(:return)
      peer.send_frame(:terminate, timeout: 100)
    end
    api = connect(core)
    api.subscribe("echo") do |req|
      raise ArgumentError, "bad input" if req.request == "boom"

      "ok #{req.request}"
    end
    refute api.poll(5000)
    core.join

    assert_equal [TID_A, 7, "ArgumentError: bad input"], failed.values_at(:trans_id, :status, :response)
    assert_equal [TID_B, 0, "ok fine"], served.values_at(:trans_id, :status, :response)
  end

  def test_forwarded_request_gets_no_return
    forwarded = nil
    next_frame = nil
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.reply(:subscribe, "route")
      peer.send_frame(:request, request_fields(TID_A, pattern: "/t/route"))
      forwarded = peer.expect(:forward)
      peer.send_frame(:request, request_fields(TID_B, pattern: "/t/route", request: "keep"))
      next_frame = peer.expect(:return)
      peer.send_frame(:terminate, timeout: 100)
    end
    api = connect(core)
    api.subscribe("route") do |req|
      next "kept" if req.request == "keep"

      api.forward(req, "/elsewhere", request: "changed")
      "ignored"
    end
    refute api.poll(5000)
    core.join

    assert_equal [TID_A, "/elsewhere", "changed", 500, 0],
                 forwarded.values_at(:trans_id, :name, :request, :timeout, :priority)
    assert_equal [TID_B, "kept"], next_frame.values_at(:trans_id, :response)
  end

  PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
  TRACE = "traceparent\0#{PARENT}\0tracestate\0congo=t61rcWkgMzE\0".b.freeze

  # PROTOCOL.md 5.1: a handler's calls carry its request's traceparent and tracestate.
  def test_handler_calls_inherit_the_trace_context
    sent = []
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.reply(:subscribe, "echo")
      peer.send_frame(:request, request_fields(TID_A, request: "calls", request_info: "a\0b\0#{TRACE}"))
      sync = peer.expect(:send_sync)
      sent << sync
      peer.send_frame(:response, trans_id: sync[:trans_id], status: 0, response_info: "", response: "answer")
      sent << peer.expect(:send_async)
      mcast = peer.expect(:mcast_async)
      sent << mcast
      peer.send_frame(:mcast_sent, trans_id: mcast[:trans_id], trans_ids: [])
      sent << peer.expect(:send_async)
      peer.expect(:return)
      peer.send_frame(:request, request_fields(TID_B, request: "forward", request_info: "traceparent\0#{PARENT}\0"))
      sent << peer.expect(:forward)
      peer.send_frame(:request, request_fields(TID_A, request: "fail", request_info: TRACE))
      sent << peer.expect(:send_async)
      peer.expect(:return)
      peer.send_frame(:terminate, timeout: 100)
      sent << peer.expect(:send_async) # after poll returned: outside any handler
    end
    api = connect(core)
    api.subscribe("echo") do |req|
      case req.request
      when "forward" then api.forward(req, "/fwd", request_info: { "k" => "v" })
      when "fail"
        api.send_async("/failing", "")
        raise ArgumentError, "after sending"
      else
        api.send_sync("/sync", "", request_info: "k\0v\0")
        api.send_async("/async", "")
        api.mcast_async("/mcast/*", "")
        api.send_async("/own", "", request_info: [["traceparent", "own"]])
        "done"
      end
    end
    refute api.poll(5000)
    api.send_async("/outside", "", request_info: "x\0y\0")
    core.join

    assert_equal [["/sync", "k\0v\0#{TRACE}"], ["/async", TRACE], ["/mcast/*", TRACE],
                  ["/own", "traceparent\0own\0"], ["/fwd", "k\0v\0traceparent\0#{PARENT}\0"],
                  ["/failing", TRACE], ["/outside", "x\0y\0"]],
                 sent.map { |fields| [fields[:name], fields[:request_info]] }
  end

  def test_requests_without_traceparent_add_nothing
    sent = []
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.reply(:subscribe, "echo")
      # No info; "traceparent" only as a value; tracestate alone.
      ["", "x\0traceparent\0", "tracestate\0a=b\0"].each do |info|
        peer.send_frame(:request, request_fields(TID_A, request_info: info))
        sent << peer.expect(:send_async)
        peer.expect(:return)
      end
      peer.send_frame(:terminate, timeout: 100)
    end
    api = connect(core)
    api.subscribe("echo") { api.send_async("/call", "", request_info: "k\0v\0") && "ok" }
    refute api.poll(5000)
    core.join
    assert_equal ["k\0v\0"] * 3, sent.map { |fields| fields[:request_info] }
  end

  def test_mcast_async_returns_copies_and_recv_async_collects_them
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      tid = peer.expect(:mcast_async)[:trans_id]
      peer.send_frame(:mcast_sent, trans_id: tid, trans_ids: [TID_A, TID_B])
      peer.send_frame(:response, trans_id: TID_A, status: 0, response_info: "", response: "one")
      peer.send_frame(:response, trans_id: TID_B, status: 4, response_info: "", response: "instance died")
    end
    api = connect(core)
    assert_equal [TID_A, TID_B], api.mcast_async("/t/*", "all")
    assert_equal "one", api.recv_async.response
    error = assert_raises(Cumulo::CrashedError) { api.recv_async(nil, timeout: 2000) }
    core.join
    assert_equal TID_B, error.trans_id
  end

  def test_recv_async_times_out_when_nothing_arrives
    core = FakeCore.new { |c| c.accept_instance[0].closed_by_instance? }
    api = connect(core)
    started = Cumulo::API.now
    assert_raises(Cumulo::TimeoutError) { api.recv_async(TID_A, timeout: 10) }
    assert_operator Cumulo::API.now - started, :<, 3
    api.close
    assert core.join
  end

  def test_oversized_frame_from_the_core_is_refused
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.write_raw([10_000_000, 0x82].pack("VC")) # header only: the body must not be awaited
    end
    api = connect(core)
    error = assert_raises(Cumulo::TooLargeError) { api.poll(5000) }
    core.join
    assert_match(/10000000/, error.message)
  end

  def test_oversized_frame_is_not_sent
    after = nil
    core = FakeCore.new do |c|
      peer, = c.accept_instance # max_frame 1024
      after = peer.expect(:send_async)
    end
    api = connect(core)
    assert_raises(Cumulo::TooLargeError) { api.send_async("/x", "x" * 2000) }
    api.send_async("/x", "small")
    core.join
    assert_equal "small", after[:request]
  end

  def test_malformed_frame_from_the_core_raises
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.write_raw("\x05\x00\x00\x00\x30\x01\x00\x00\x00".b) # PING with a 4-byte nonce
    end
    api = connect(core)
    assert_raises(Cumulo::MalformedError) { api.poll(5000) }
    core.join
  end

  def test_closed_connection_raises_connection_closed
    core = FakeCore.new do |c|
      peer, = c.accept_instance
      peer.close
    end
    api = connect(core)
    assert_raises(Cumulo::ConnectionClosed) { api.poll(5000) }
    core.join
  end

  def test_run_starts_one_instance_per_thread
    hellos = []
    goodbye = []
    core = FakeCore.new do |c|
      peers = Array.new(2) do
        peer, hello = c.accept_instance
        hellos << hello
        peer
      end
      peers.each { |peer| peer.reply(:subscribe, "work") }
      peers.each { |peer| peer.send_frame(:terminate, timeout: 100) }
      peers.each { |peer| goodbye << peer.closed_by_instance? }
    end
    setups = Queue.new
    Cumulo.run(thread_count: 2, socket: core.path, prefix: "/t/") do |api|
      api.subscribe("work") { "done" }
      setups << api.thread_index
    end
    core.join
    assert_equal [0, 1], hellos.map { |hello| hello[:thread_index] }.sort
    assert_equal [0, 1], Array.new(2) { setups.pop }.sort
    assert_equal [true, true], goodbye
  end
end
