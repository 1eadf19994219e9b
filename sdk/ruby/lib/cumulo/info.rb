# frozen_string_literal: true

module Cumulo
  # The key/value encoding of request_info and response_info
  # (PROTOCOL.md section 5): key\0value\0key\0value\0 ...
  module Info
    NUL = "\0".b.freeze

    module_function

    # +pairs+: a Hash or a list of [key, value] pairs (order and repeats kept).
    # Returns a binary String.
    def encode(pairs)
      out = String.new(encoding: Encoding::BINARY)
      (pairs || []).each do |key, value|
        [key, value].each do |field|
          bytes = field.to_s.b
          raise InvalidArgumentError, "key/value field contains NUL: #{field.inspect}" if bytes.include?(NUL)

          out << bytes << NUL
        end
      end
      out
    end

    # Returns [[key, value], ...]; strings are UTF-8 when valid, else binary.
    # Raises Cumulo::MalformedError on a missing final NUL or an odd count.
    def parse(data)
      data = (data || "").b
      return [] if data.empty?
      raise MalformedError, "key/value data does not end with NUL" unless data.end_with?(NUL)

      fields = data.split(NUL, -1)[0...-1] # the final NUL leaves one empty string
      raise MalformedError, "key/value data has an odd number of fields" if fields.size.odd?

      fields.map { |field| text(field) }.each_slice(2).to_a
    end

    # The first value of +key+ in encoded +data+, or nil.
    def lookup(data, key)
      pair = parse(data).find { |k, _| k == key }
      pair && pair[1]
    end

    def text(bytes)
      utf8 = bytes.dup.force_encoding(Encoding::UTF_8)
      utf8.valid_encoding? ? utf8 : bytes
    end
  end
end
