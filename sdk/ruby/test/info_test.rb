# frozen_string_literal: true

require_relative "test_helper"

class InfoTest < Minitest::Test
  def test_hash_and_pairs_encode_alike
    assert_equal "a\0001\0b\0002\0".b, Cumulo::Info.encode({ "a" => "1", "b" => 2 })
    assert_equal "a\0001\0a\0002\0".b, Cumulo::Info.encode([%w[a 1], %w[a 2]])
    assert_equal "", Cumulo::Info.encode([])
  end

  def test_round_trip_keeps_order_repeats_and_empty_values
    pairs = [["k", ""], ["", "v"], ["k", "ключ"]]
    assert_equal pairs, Cumulo::Info.parse(Cumulo::Info.encode(pairs))
  end

  def test_nul_inside_a_key_or_value_is_refused
    assert_raises(Cumulo::InvalidArgumentError) { Cumulo::Info.encode([["a\0b", "1"]]) }
    assert_raises(Cumulo::InvalidArgumentError) { Cumulo::Info.encode([%W[a 1\0]]) }
  end

  def test_malformed_buffers_raise
    ["\0", "a", "a\0b", "a\0b\0c\0"].each do |raw|
      assert_raises(Cumulo::MalformedError, raw.inspect) { Cumulo::Info.parse(raw) }
    end
  end

  def test_invalid_utf8_comes_back_as_binary
    pairs = Cumulo::Info.parse("k\0\xff\0".b)
    assert_equal Encoding::BINARY, pairs[0][1].encoding
    assert_equal "\xff".b, pairs[0][1]
  end

  def test_lookup_finds_the_first_value
    data = Cumulo::Info.encode([%w[value 1], %w[value 2]])
    assert_equal "1", Cumulo::Info.lookup(data, "value")
    assert_nil Cumulo::Info.lookup(data, "other")
  end
end
