# frozen_string_literal: true

require_relative "test_helper"

class CodecTest < Minitest::Test
  TID = ("\x01".b * 16).freeze

  def test_decode_rejects_a_frame_shorter_than_its_length
    frame = Cumulo::Codec.encode(:ping, nonce: 5)
    assert_raises(Cumulo::MalformedError) { Cumulo::Codec.decode(frame[0..-2]) }
    assert_raises(Cumulo::MalformedError) { Cumulo::Codec.decode("#{frame}\0") }
  end

  def test_huge_trans_id_count_is_malformed_without_allocating
    body = "\x85".b + TID + [0xffff_ffff].pack("V")
    assert_raises(Cumulo::MalformedError) { Cumulo::Codec.decode_body(body) }
  end

  def test_encode_checks_ranges_and_sizes
    assert_raises(Cumulo::InvalidArgumentError) { Cumulo::Codec.encode(:ping, nonce: -1) }
    assert_raises(Cumulo::InvalidArgumentError) { Cumulo::Codec.encode(:terminate, timeout: 2**32) }
    assert_raises(Cumulo::InvalidArgumentError) do
      Cumulo::Codec.encode(:subscribe, req_id: 1, pattern: "x" * 65_536)
    end
    assert_raises(Cumulo::InvalidArgumentError) do
      Cumulo::Codec.encode(:return, trans_id: "short", status: 0, response_info: "", response: "")
    end
    assert_raises(Cumulo::InvalidArgumentError) do
      Cumulo::Codec.encode(:subscribe, req_id: 1, pattern: "\xff".b)
    end
    assert_raises(Cumulo::InvalidArgumentError) { Cumulo::Codec.encode(:ping, {}) }
  end

  def test_length_at_the_limit_is_accepted
    assert_equal 9, Cumulo::Codec.frame_length([9].pack("V"), 9)
    assert_raises(Cumulo::TooLargeError) { Cumulo::Codec.frame_length([10].pack("V"), 9) }
  end

  def test_errors_carry_status_codes_by_name
    error = Cumulo::Error.for(2, "nobody there")
    assert_instance_of Cumulo::NoServiceError, error
    assert_equal 2, error.status
    assert_equal "NO_SERVICE", error.status_name
    unknown = Cumulo::Error.for(99, "from a newer core")
    assert_instance_of Cumulo::Error, unknown
    assert_equal "STATUS_99", unknown.status_name
    unavailable = Cumulo::Error.for(13, "given up")
    assert_instance_of Cumulo::UnavailableError, unavailable
    assert_equal [13, "UNAVAILABLE"], [Cumulo::Status::UNAVAILABLE, unavailable.status_name]
    assert_equal "STATUS_14", Cumulo::Status.name_of(14)
  end
end
