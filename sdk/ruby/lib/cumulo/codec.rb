# frozen_string_literal: true

module Cumulo
  # Frame encoding and decoding (PROTOCOL.md sections 2 and 4). Messages are
  # a Frame: a type Symbol (:send_async, ...) and a Hash of fields named as
  # in the protocol. tid and bytes fields are binary Strings, str fields
  # UTF-8 Strings, MCAST_SENT's :trans_ids an Array of tids.
  module Codec
    VERSION = 1
    DEFAULT_MAX_FRAME = 8 * 1024 * 1024
    HEADER_SIZE = 4
    TID_SIZE = 16

    Frame = Struct.new(:type, :fields)

    TYPES = {
      hello: 0x01, subscribe: 0x02, unsubscribe: 0x03, subscribe_count: 0x04,
      send_async: 0x10, send_sync: 0x11, mcast_async: 0x12,
      return: 0x20, forward: 0x21, ping: 0x30, pong: 0x31, goodbye: 0x32,
      welcome: 0x81, request: 0x82, response: 0x83, reply: 0x84,
      mcast_sent: 0x85, terminate: 0x86, error: 0x87
    }.freeze
    TYPE_NAMES = TYPES.invert.freeze

    CONTROL = [%i[req_id u32], %i[pattern str]].freeze
    SEND = [%i[trans_id tid], %i[timeout u32], %i[priority i8], %i[flags u8],
            %i[name str], %i[request_info bytes], %i[request bytes]].freeze
    ANSWER = [%i[trans_id tid], %i[status u16], %i[response_info bytes], %i[response bytes]].freeze
    LAYOUTS = {
      hello: [%i[version u16], %i[window u32], %i[thread_index u32], %i[token str], %i[prefix str]],
      subscribe: CONTROL, unsubscribe: CONTROL, subscribe_count: CONTROL,
      send_async: SEND, send_sync: SEND, mcast_async: SEND, forward: SEND,
      return: ANSWER, response: ANSWER,
      ping: [%i[nonce u64]], pong: [%i[nonce u64]], goodbye: [],
      welcome: [%i[version u16], %i[node_id u32], %i[instance_id u32], %i[process_index u32],
                %i[process_count u32], %i[thread_count u32], %i[window u32], %i[max_frame u32],
                %i[timeout_async u32], %i[timeout_sync u32], %i[timeout_terminate u32],
                %i[priority_default i8], %i[keepalive u32], %i[prefix str]],
      request: [%i[trans_id tid], %i[timeout u32], %i[priority i8], %i[flags u8], %i[source u64],
                %i[name str], %i[pattern str], %i[request_info bytes], %i[request bytes]],
      reply: [%i[req_id u32], %i[status u16], %i[value u32], %i[message str]],
      mcast_sent: [%i[trans_id tid], %i[trans_ids tids]],
      terminate: [%i[timeout u32]],
      error: [%i[status u16], %i[message str]]
    }.freeze

    # [pack directive, size, smallest, largest] of the fixed-width integers.
    INTEGERS = {
      u8: ["C", 1, 0, 0xff], i8: ["c", 1, -0x80, 0x7f], u16: ["v", 2, 0, 0xffff],
      u32: ["V", 4, 0, 0xffff_ffff], u64: ["Q<", 8, 0, 0xffff_ffff_ffff_ffff]
    }.freeze

    module_function

    # The whole frame, length prefix included, as a binary String.
    def encode(type, fields = {})
      code = TYPES.fetch(type) { raise InvalidArgumentError, "unknown frame type #{type.inspect}" }
      body = String.new(encoding: Encoding::BINARY)
      body << code.chr
      LAYOUTS.fetch(type).each do |name, kind|
        value = fields.fetch(name) { raise InvalidArgumentError, "#{type}: missing field #{name}" }
        encode_field(body, name, kind, value)
      end
      [body.bytesize].pack("V") << body
    end

    # Decodes exactly one whole frame (length prefix included).
    def decode(data, max_frame: DEFAULT_MAX_FRAME)
      data = data.b
      raise MalformedError, "frame shorter than its length field" if data.bytesize < HEADER_SIZE

      length = frame_length(data.byteslice(0, HEADER_SIZE), max_frame)
      if data.bytesize != HEADER_SIZE + length
        raise MalformedError, "frame length #{length} but #{data.bytesize - HEADER_SIZE} bytes follow"
      end

      decode_body(data.byteslice(HEADER_SIZE, length))
    end

    # Validates a 4-byte length field against +max_frame+ and returns it.
    def frame_length(header, max_frame)
      length = header.unpack1("V")
      raise MalformedError, "frame length 0 (no type byte)" if length.zero?
      raise TooLargeError, "frame of #{length} bytes is over the limit of #{max_frame}" if length > max_frame

      length
    end

    # Decodes the bytes after the length field: the type byte and the body,
    # which the type's layout must consume exactly.
    def decode_body(data)
      raise MalformedError, "frame has no type byte" if data.empty?

      type = TYPE_NAMES.fetch(data.getbyte(0)) do
        raise MalformedError, format("unknown frame type 0x%02x", data.getbyte(0))
      end
      cursor = Cursor.new(data, 1)
      fields = LAYOUTS.fetch(type).to_h { |name, kind| [name, cursor.read(kind)] }
      raise MalformedError, "#{type}: #{cursor.remaining} trailing bytes" unless cursor.remaining.zero?

      Frame.new(type, fields)
    end

    def encode_field(out, name, kind, value)
      case kind
      when :tid then out << tid_bytes(name, value)
      when :str then encode_str(out, name, value)
      when :bytes
        raw = value.to_s.b
        raise TooLargeError, "#{name}: #{raw.bytesize} bytes" if raw.bytesize > 0xffff_ffff

        out << [raw.bytesize].pack("V") << raw
      when :tids
        out << [value.size].pack("V")
        value.each { |tid| out << tid_bytes(name, tid) }
      else encode_integer(out, name, kind, value)
      end
    end

    def encode_integer(out, name, kind, value)
      directive, _size, min, max = INTEGERS.fetch(kind)
      unless value.is_a?(Integer) && value.between?(min, max)
        raise InvalidArgumentError, "#{name}: #{value.inspect} is not a #{kind}"
      end

      out << [value].pack(directive)
    end

    def encode_str(out, name, value)
      text = value.to_s.dup.force_encoding(Encoding::UTF_8)
      raise InvalidArgumentError, "#{name}: not valid UTF-8" unless text.valid_encoding?
      raise InvalidArgumentError, "#{name}: #{text.bytesize} bytes is over 65535" if text.bytesize > 0xffff

      out << [text.bytesize].pack("v") << text.b
    end

    def tid_bytes(name, value)
      raw = value.to_s.b
      raise InvalidArgumentError, "#{name}: a trans_id is 16 bytes, not #{raw.bytesize}" if raw.bytesize != TID_SIZE

      raw
    end

    # Reads fields from a binary String, never past its end.
    class Cursor
      def initialize(data, position)
        @data = data
        @position = position
      end

      def remaining
        @data.bytesize - @position
      end

      def read(kind)
        case kind
        when :tid then take(TID_SIZE)
        when :str then utf8(take(integer(:u16)))
        when :bytes then take(integer(:u32))
        when :tids then tids
        else integer(kind)
        end
      end

      private

      def tids
        count = integer(:u32)
        raise MalformedError, "#{count} trans_ids run past the end of the frame" if count * TID_SIZE > remaining

        Array.new(count) { take(TID_SIZE) }
      end

      def integer(kind)
        directive, size, = INTEGERS.fetch(kind)
        take(size).unpack1(directive)
      end

      def take(count)
        raise MalformedError, "field of #{count} bytes runs past the end of the frame" if count > remaining

        bytes = @data.byteslice(@position, count)
        @position += count
        bytes
      end

      def utf8(bytes)
        text = bytes.force_encoding(Encoding::UTF_8)
        raise MalformedError, "string field is not valid UTF-8" unless text.valid_encoding?

        text
      end
    end
  end
end
