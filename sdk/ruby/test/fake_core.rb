# frozen_string_literal: true

require "socket"
require "tmpdir"
require "cumulo"

# A scripted stand-in for the cumulo core on a real Unix socket. The script
# block runs in its own thread with one Peer per accepted connection; join
# re-raises whatever failed inside it.
class FakeCore
  READ_TIMEOUT = 5

  WELCOME = {
    version: 1, node_id: 3, instance_id: 9, process_index: 1, process_count: 2, thread_count: 4,
    window: 1, max_frame: 1024, timeout_async: 700, timeout_sync: 800, timeout_terminate: 900,
    priority_default: -2, keepalive: 5000, prefix: "/t/"
  }.freeze

  attr_reader :path

  def initialize(&script)
    @dir = Dir.mktmpdir("cumulo-test")
    @path = File.join(@dir, "core.sock")
    @server = UNIXServer.new(@path)
    @thread = Thread.new { script.call(self) }
    @thread.report_on_exception = false
  end

  def accept
    ready = IO.select([@server], nil, nil, READ_TIMEOUT)
    raise "no connection to the fake core" unless ready

    Peer.new(@server.accept)
  end

  # Accepts a connection and completes the handshake; returns [peer, hello].
  def accept_instance(**welcome)
    peer = accept
    hello = peer.expect(:hello)
    peer.send_frame(:welcome, WELCOME.merge(welcome))
    [peer, hello]
  end

  def join
    @thread.value
  ensure
    @server.close
    FileUtils.remove_entry(@dir)
  end

  # One connection, seen from the core's side.
  class Peer
    def initialize(socket)
      @socket = socket
    end

    def send_frame(type, fields = {})
      write_raw(Cumulo::Codec.encode(type, fields))
    end

    def write_raw(bytes)
      @socket.write(bytes)
    end

    def read_frame
      header = read_exactly(4)
      length = header.unpack1("V")
      Cumulo::Codec.decode(header + read_exactly(length))
    end

    # The fields of the next frame, which must be of +type+.
    def expect(type)
      frame = read_frame
      raise "expected #{type}, got #{frame.type} #{frame.fields.inspect}" unless frame.type == type

      frame.fields
    end

    # Answers a control request with REPLY.
    def reply(type, pattern, status: 0, value: 0, message: "")
      fields = expect(type)
      raise "#{type} of #{fields[:pattern].inspect}, expected #{pattern.inspect}" unless fields[:pattern] == pattern

      send_frame(:reply, req_id: fields[:req_id], status: status, value: value, message: message)
    end

    # True when the instance closed its end (EOF) within the read timeout.
    def closed_by_instance?
      loop do
        frame = read_frame
        return false unless frame.type == :goodbye
      end
    rescue EOFError
      true
    end

    def close
      @socket.close
    end

    private

    def read_exactly(count)
      data = String.new(encoding: Encoding::BINARY)
      while data.bytesize < count
        raise "fake core: read timed out" unless IO.select([@socket], nil, nil, READ_TIMEOUT)

        chunk = @socket.read_nonblock(count - data.bytesize, exception: false)
        raise EOFError, "instance closed the connection" if chunk.nil?

        data << chunk unless chunk == :wait_readable
      end
      data
    end
  end
end
