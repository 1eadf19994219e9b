# frozen_string_literal: true

module Cumulo
  # One instance: one connection to the core. Not thread-safe: create one per
  # thread (Cumulo.run does). Timeouts are in milliseconds, as on the wire.
  class API
    WAIT_FOR_SERVICE = 0x01
    # A REQUEST carries more than the SEND it came from (source, pattern).
    REQUEST_OVERHEAD = 8 + 2 + 0xffff
    # How long past a request's timeout to wait for the core's own TIMEOUT.
    GRACE_MS = 1000
    HANDSHAKE_TIMEOUT_MS = 30_000

    attr_reader :thread_index, :node_id, :instance_id, :process_index, :process_count,
                :thread_count, :prefix, :window, :max_frame, :timeout_async, :timeout_sync,
                :timeout_terminate, :priority_default, :keepalive

    def self.now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # Managed (started by the core): everything comes from the environment.
    # Unmanaged (tests, tools): pass +socket:+ and +prefix:+, no token.
    # +max_frame:+ caps frames read from the core (default: the core's
    # max_frame plus what a REQUEST adds).
    def initialize(thread_index = 0, socket: ENV.fetch("CUMULO_SOCKET", nil),
                   token: ENV.fetch("CUMULO_TOKEN", ""), prefix: nil, window: 1, max_frame: nil)
      @thread_index = thread_index
      @read_limit = max_frame
      @max_frame = max_frame || Codec::DEFAULT_MAX_FRAME
      @handlers = {}
      @queue = []
      @responses = {}
      @abandoned = {}
      @next_req_id = 0
      @last_time_ns = 0
      @terminated = false
      # The trace context of the request whose handler runs (PROTOCOL.md 5.1):
      # its encoded traceparent/tracestate pairs, else nil. Kept on the
      # instance: an API belongs to one thread and runs one handler at a time.
      @trace = nil
      hello_prefix = token.to_s.empty? ? prefix.to_s : ""
      if token.to_s.empty? && !hello_prefix.start_with?("/")
        raise InvalidArgumentError, "an unmanaged instance needs a prefix starting with '/'"
      end

      @connection = Connection.new(socket)
      handshake(token.to_s, hello_prefix, window)
    end

    # Subscribes +pattern+ (relative to the prefix); the block handles its
    # requests and returns the response: a String, or [response_info,
    # response] where response_info is a String, Hash or list of pairs.
    def subscribe(pattern, &handler)
      raise ArgumentError, "subscribe needs a handler block" unless handler

      control(:subscribe, pattern)
      @handlers[prefix + pattern] = handler
      nil
    end

    def unsubscribe(pattern)
      control(:unsubscribe, pattern)
      @handlers.delete(prefix + pattern) if subscribe_count(pattern).zero?
      nil
    end

    def subscribe_count(pattern)
      control(:subscribe_count, pattern)
    end

    # Returns the new request's trans_id; collect the answer with recv_async.
    def send_async(name, request, **options)
      send_request(:send_async, name, request, **options)
    end

    # Returns [response_info, response]; raises a Cumulo::Error subclass for
    # an error status.
    def send_sync(name, request, timeout: nil, **options)
      trans_id = send_request(:send_sync, name, request, timeout: timeout, **options)
      fields = await(deadline_after(timeout || timeout_sync)) do |frame|
        frame.fields if frame.type == :response && frame.fields[:trans_id] == trans_id
      end
      unless fields
        @abandoned[trans_id] = true
        raise TimeoutError.new("no response to #{name} in time", trans_id: trans_id)
      end
      answer(fields)
    end

    # Sends a copy to every matching subscriber; returns their trans_ids.
    def mcast_async(name, request, timeout: nil, **options)
      trans_id = send_request(:mcast_async, name, request, timeout: timeout, **options)
      fields = await(deadline_after(timeout || timeout_async)) do |frame|
        frame.fields if frame.type == :mcast_sent && frame.fields[:trans_id] == trans_id
      end
      raise TimeoutError.new("no MCAST_SENT for #{name} in time", trans_id: trans_id) unless fields

      fields[:trans_ids]
    end

    # The Response of +trans_id+, or of any async send when nil. Raises a
    # Cumulo::Error subclass for an error status, TimeoutError if nothing came.
    def recv_async(trans_id = nil, timeout: nil)
      fields = trans_id ? @responses.delete(trans_id) : take_first_response
      fields ||= await(deadline_after(timeout || timeout_async)) do |frame|
        frame.fields if frame.type == :response && (trans_id.nil? || frame.fields[:trans_id] == trans_id)
      end
      raise TimeoutError.new("no response received in time", trans_id: trans_id) unless fields

      Response.new(fields[:trans_id], *answer(fields))
    end

    # Passes +req+ (being handled) on to +name+; the handler's return value
    # is then ignored.
    def forward(req, name, request_info: req.request_info, request: req.request,
                timeout: req.timeout, priority: req.priority)
      @connection.write_frame(:forward, {
                                trans_id: req.trans_id, timeout: timeout, priority: priority, flags: 0,
                                name: name, request_info: traced(info_bytes(request_info)), request: request
                              }, max_frame)
      req.mark_forwarded
      nil
    end

    # The event loop. Returns false once TERMINATE arrived (after finishing
    # the requests already delivered), true when +timeout+ ms passed first.
    def poll(timeout = nil)
      deadline = timeout && deadline_after(timeout, grace: 0)
      loop do
        request = @queue.shift
        if request
          handle(request)
          next
        end
        return false if @terminated

        frame = next_frame(deadline)
        return true unless frame

        background(frame)
      end
    end

    def terminated?
      @terminated
    end

    # Says GOODBYE and closes the connection.
    def close
      return if @connection.closed?

      begin
        @connection.write_frame(:goodbye, {}, max_frame)
      rescue Error
        nil # already gone
      end
      @connection.close
    end

    def info_encode(pairs)
      Info.encode(pairs)
    end

    def info_parse(data)
      Info.parse(data)
    end

    private

    def handshake(token, hello_prefix, window)
      @connection.write_frame(:hello, { version: Codec::VERSION, window: window, thread_index: thread_index,
                                        token: token, prefix: hello_prefix }, max_frame)
      frame = next_frame(deadline_after(HANDSHAKE_TIMEOUT_MS, grace: 0))
      case frame&.type
      when :welcome then welcome(frame.fields)
      when :error then raise Error.for(frame.fields[:status], frame.fields[:message])
      when nil then raise TimeoutError, "no WELCOME from the core"
      else raise ProtocolError, "expected WELCOME, got #{frame.type.upcase}"
      end
    rescue StandardError
      @connection.close
      raise
    end

    def welcome(fields)
      @node_id, @instance_id, @process_index, @process_count, @thread_count, @window, @max_frame,
        @timeout_async, @timeout_sync, @timeout_terminate, @priority_default, @keepalive, @prefix =
        fields.values_at(:node_id, :instance_id, :process_index, :process_count, :thread_count, :window,
                         :max_frame, :timeout_async, :timeout_sync, :timeout_terminate,
                         :priority_default, :keepalive, :prefix)
    end

    def read_limit
      @read_limit || (@max_frame + REQUEST_OVERHEAD)
    end

    def control(type, pattern)
      req_id = (@next_req_id = (@next_req_id + 1) & 0xffff_ffff)
      @connection.write_frame(type, { req_id: req_id, pattern: pattern }, max_frame)
      fields = await(nil) { |frame| frame.fields if frame.type == :reply && frame.fields[:req_id] == req_id }
      raise Error.for(fields[:status], fields[:message]) unless fields[:status] == Status::OK

      fields[:value]
    end

    def send_request(type, name, request, request_info: "", timeout: nil, priority: nil, wait_for_service: false)
      trans_id = new_trans_id
      @connection.write_frame(type, {
                                trans_id: trans_id, timeout: timeout || 0, priority: priority || priority_default,
                                flags: wait_for_service ? WAIT_FOR_SERVICE : 0, name: name,
                                request_info: traced(info_bytes(request_info)), request: request.to_s
                              }, max_frame)
      trans_id
    end

    # PROTOCOL 2.2: time (ns, strictly increasing), node_id, instance_id.
    def new_trans_id
      time_ns = Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
      time_ns = @last_time_ns + 1 if time_ns <= @last_time_ns
      @last_time_ns = time_ns
      [time_ns, node_id, instance_id].pack("Q>NN")
    end

    # Reads frames until the block returns a value for one (returned) or the
    # deadline passes (nil); every other frame is handled in the background.
    def await(deadline)
      loop do
        frame = next_frame(deadline)
        return nil unless frame

        wanted = yield(frame)
        return wanted if wanted

        background(frame)
      end
    end

    def next_frame(deadline)
      @connection.read_frame(deadline, read_limit)
    rescue TooLargeError, MalformedError
      @connection.close # the stream cannot be resynchronised
      raise
    end

    def background(frame)
      fields = frame.fields
      case frame.type
      when :ping then @connection.write_frame(:pong, { nonce: fields[:nonce] }, max_frame)
      when :request then @queue << Request.new(fields)
      when :response then keep_response(fields)
      when :terminate then @terminated = true
      when :error
        @connection.close
        raise Error.for(fields[:status], fields[:message])
      when :reply, :mcast_sent, :pong then nil # answers nobody waits for any more
      else raise ProtocolError, "unexpected #{frame.type.upcase} from the core"
      end
    end

    def keep_response(fields)
      return if @abandoned.delete(fields[:trans_id])

      @responses[fields[:trans_id]] = fields
    end

    def take_first_response
      trans_id = @responses.each_key.first
      trans_id && @responses.delete(trans_id)
    end

    def answer(fields)
      status = fields[:status]
      return [fields[:response_info], fields[:response]] if status == Status::OK

      message = Info.text(fields[:response])
      raise Error.for(status, message.empty? ? Status.name_of(status) : message, trans_id: fields[:trans_id])
    end

    def handle(req)
      handler = @handlers[req.pattern]
      status, info, response =
        if handler
          with_trace_context(req) { run_handler(handler, req) }
        else
          [Status::NO_SERVICE, "", "no handler for #{req.pattern}"]
        end
      return if req.forwarded?

      give_back(req, status, info, response)
    end

    def run_handler(handler, req)
      result = handler.call(req)
      info, response = result.is_a?(Array) ? result : ["", result]
      raise TypeError, "handler returned #{response.class}, not a String" unless response.nil? || response.is_a?(String)

      [Status::OK, info_bytes(info), response.to_s]
    rescue StandardError => e
      # The sender gets the message; the backtrace goes to stderr, in one
      # write so that the core logs it as one record.
      $stderr.write("cumulo: handler for #{req.name} raised #{e.class}: #{e.message}\n", e.full_message(highlight: false))
      [Status::SERVICE_ERROR, "", "#{e.class}: #{e.message}"]
    end

    # PROTOCOL.md 5.1: while the handler of +req+ runs, its calls inherit
    # req's traceparent and tracestate (see @trace); cleared when it ends.
    def with_trace_context(req)
      previous = @trace
      @trace = trace_context(req.request_info)
      yield
    ensure
      @trace = previous
    end

    # The encoded traceparent and tracestate pairs of +request_info+, or nil
    # without a traceparent (a request without one is not parsed).
    def trace_context(request_info)
      return nil unless request_info.include?("traceparent\0")

      pairs = Info.parse(request_info)
      parent = pairs.find { |key, _| key == "traceparent" }
      state = pairs.find { |key, _| key == "tracestate" }
      parent && Info.encode(state ? [parent, state] : [parent])
    rescue MalformedError
      nil
    end

    # +info+ (encoded) with the current trace context appended, unless it has
    # a traceparent of its own or no handler with a context is running.
    def traced(info)
      return info unless @trace
      return info if Info.parse(info).any? { |key, _| key == "traceparent" }

      info + @trace
    rescue MalformedError
      info # sent as given, for the core to refuse
    end

    def give_back(req, status, info, response)
      @connection.write_frame(:return, { trans_id: req.trans_id, status: status,
                                         response_info: info, response: response }, max_frame)
    rescue TooLargeError => e
      @connection.write_frame(:return, { trans_id: req.trans_id, status: Status::TOO_LARGE,
                                         response_info: "", response: e.message }, max_frame)
    end

    def info_bytes(info)
      info.is_a?(String) ? info.b : Info.encode(info)
    end

    def deadline_after(milliseconds, grace: GRACE_MS)
      API.now + ((milliseconds + grace) / 1000.0)
    end
  end
end
