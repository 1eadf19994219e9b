# frozen_string_literal: true

require "io/wait"
require "socket"

module Cumulo
  # One stream to the core: writes frames and reads whole frames with a
  # deadline, buffering partial ones between calls.
  class Connection
    READ_CHUNK = 64 * 1024

    # +address+: a Unix socket path or "tcp://host:port".
    def initialize(address)
      raise InvalidArgumentError, "no socket given (CUMULO_SOCKET is not set)" if address.to_s.empty?

      @socket = open_socket(address.to_s)
      @buffer = String.new(encoding: Encoding::BINARY)
    end

    def write_frame(type, fields, max_frame)
      frame = Codec.encode(type, fields)
      length = frame.bytesize - Codec::HEADER_SIZE
      raise TooLargeError, "#{type} frame of #{length} bytes is over the limit of #{max_frame}" if length > max_frame

      @socket.write(frame)
    rescue IOError, SystemCallError => e
      raise ConnectionClosed, "connection to the core lost: #{e.message}"
    end

    # The next Codec::Frame, or nil once +deadline+ (a monotonic time in
    # seconds, nil for none) passes. A length over +max_frame+ raises
    # TooLargeError before the body is read.
    def read_frame(deadline, max_frame)
      loop do
        if @buffer.bytesize >= Codec::HEADER_SIZE
          length = Codec.frame_length(@buffer.byteslice(0, Codec::HEADER_SIZE), max_frame)
          return take_frame(length) if @buffer.bytesize >= Codec::HEADER_SIZE + length
        end
        return nil unless fill(deadline)
      end
    end

    def close
      @socket.close unless @socket.closed?
    end

    def closed?
      @socket.closed?
    end

    private

    def open_socket(address)
      if address.start_with?("tcp://")
        host, _, port = address.delete_prefix("tcp://").rpartition(":")
        TCPSocket.new(host.delete_prefix("[").delete_suffix("]"), Integer(port))
      else
        UNIXSocket.new(address)
      end
    rescue SystemCallError, SocketError, ArgumentError => e
      raise ConnectionClosed, "cannot connect to #{address}: #{e.message}"
    end

    def take_frame(length)
      body = @buffer.byteslice(Codec::HEADER_SIZE, length)
      @buffer = @buffer.byteslice(Codec::HEADER_SIZE + length..)
      Codec.decode_body(body)
    end

    # Reads what is available; false when the deadline passed first.
    def fill(deadline)
      loop do
        chunk = @socket.read_nonblock(READ_CHUNK, exception: false)
        case chunk
        when nil then raise ConnectionClosed, "the core closed the connection"
        when :wait_readable
          wait = deadline && deadline - API.now
          return false if wait && wait <= 0
          return false unless @socket.wait_readable(wait)
        else
          @buffer << chunk
          return true
        end
      end
    rescue IOError, SystemCallError => e
      raise ConnectionClosed, "connection to the core lost: #{e.message}"
    end
  end
end
