# frozen_string_literal: true

module Cumulo
  # A REQUEST delivered to a handler.
  class Request
    SYNC = 0x01
    MCAST = 0x02

    attr_reader :trans_id, :timeout, :priority, :flags, :source, :name, :pattern,
                :request_info, :request

    def initialize(fields)
      @trans_id, @timeout, @priority, @flags, @source, @name, @pattern, @request_info, @request =
        fields.values_at(:trans_id, :timeout, :priority, :flags, :source, :name, :pattern,
                         :request_info, :request)
      @forwarded = false
    end

    # Sent with send_sync.
    def sync?
      (flags & SYNC) != 0
    end

    # A multicast copy.
    def mcast?
      (flags & MCAST) != 0
    end

    # request_info parsed as key/value pairs (raises Cumulo::MalformedError).
    def info
      Info.parse(request_info)
    end

    def forwarded?
      @forwarded
    end

    def mark_forwarded
      @forwarded = true
    end
  end

  # A RESPONSE collected with API#recv_async.
  Response = Struct.new(:trans_id, :response_info, :response)
end
