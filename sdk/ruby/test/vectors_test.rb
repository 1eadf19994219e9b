# frozen_string_literal: true

require_relative "test_helper"

# Every vector of proto/vectors/*.json: decode and compare every field,
# encode the fields and compare the bytes, reject every invalid one.
class VectorsTest < Minitest::Test
  VECTOR_LIMIT = 1024 # TOO_LARGE vectors assume this frame limit
  ERRORS = { "MALFORMED" => Cumulo::MalformedError, "TOO_LARGE" => Cumulo::TooLargeError }.freeze

  FILES = Dir[File.join(VECTORS_DIR, "*.json")].sort
  raise "no vectors found in #{VECTORS_DIR}" if FILES.empty?

  # JSON fields to the codec's values: tid and bytes fields as binary.
  def self.expected_fields(type, json_fields)
    Cumulo::Codec::LAYOUTS.fetch(type).to_h do |name, kind|
      value = json_fields.fetch(name.to_s)
      value = case kind
              when :tid, :bytes then hex_bytes(value)
              when :tids then value.map { |hex| hex_bytes(hex) }
              else value
              end
      [name, value]
    end
  end

  FILES.each do |file|
    family = File.basename(file, ".json")
    data = JSON.parse(File.read(file))

    data.fetch("vectors").each do |vector|
      if family == "kv"
        define_method("test_kv_#{vector['name']}") do
          pairs = Cumulo::Info.parse(hex_bytes(vector["hex"]))
          assert_equal vector["pairs"], pairs
          assert_equal vector["hex"], Cumulo::Info.encode(vector["pairs"]).unpack1("H*")
        end
        next
      end

      define_method("test_#{family}_#{vector['name']}") do
        type = vector["type"].downcase.to_sym
        expected = VectorsTest.expected_fields(type, vector["fields"])
        frame = Cumulo::Codec.decode(hex_bytes(vector["hex"]))
        assert_equal type, frame.type
        assert_equal expected, frame.fields
        assert_equal vector["hex"], Cumulo::Codec.encode(type, expected).unpack1("H*")
      end
    end

    data.fetch("invalid", []).each do |vector|
      define_method("test_#{family}_invalid_#{vector['name']}") do
        raw = hex_bytes(vector["hex"])
        error = ERRORS.fetch(vector["error"])
        if family == "kv"
          assert_raises(error) { Cumulo::Info.parse(raw) }
        else
          assert_raises(error) { Cumulo::Codec.decode(raw, max_frame: VECTOR_LIMIT) }
        end
      end
    end
  end

  def test_every_family_is_covered
    families = FILES.map { |file| File.basename(file, ".json") }
    assert_includes families, "kv"
    assert_operator families.size, :>=, 6
  end
end
