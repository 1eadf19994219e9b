# frozen_string_literal: true

module Cumulo
  # Status codes of PROTOCOL.md section 2.3.
  module Status
    OK = 0
    TIMEOUT = 1
    NO_SERVICE = 2
    QUEUE_FULL = 3
    CRASHED = 4
    MALFORMED = 5
    SHUTTING_DOWN = 6
    SERVICE_ERROR = 7
    TOO_LARGE = 8
    INVALID_ARGUMENT = 9
    UNSUPPORTED_VERSION = 10
    UNAUTHORIZED = 11
    PROTOCOL = 12
    UNAVAILABLE = 13

    NAMES = constants.to_h { |name| [const_get(name), name.to_s] }.freeze

    # "TIMEOUT" for 1; codes a newer core may send are named "STATUS_<n>".
    def self.name_of(code)
      NAMES.fetch(code) { "STATUS_#{code}" }
    end
  end

  # Every failure the SDK reports carries a protocol status code; rescue
  # Cumulo::Error for all of them or a subclass (Cumulo::TimeoutError, ...)
  # for one.
  class Error < StandardError
    STATUS = Status::SERVICE_ERROR
    BY_STATUS = {} # rubocop:disable Style/MutableConstant -- filled below

    attr_reader :status, :trans_id

    def initialize(message = nil, status: self.class::STATUS, trans_id: nil)
      @status = status
      @trans_id = trans_id
      super(message || Status.name_of(status))
    end

    def status_name
      Status.name_of(status)
    end

    # An exception of the subclass matching +status+ (Cumulo::Error for codes
    # this SDK does not know).
    def self.for(status, message, trans_id: nil)
      BY_STATUS.fetch(status, Error).new(message, status: status, trans_id: trans_id)
    end
  end

  {
    TimeoutError: Status::TIMEOUT,
    NoServiceError: Status::NO_SERVICE,
    QueueFullError: Status::QUEUE_FULL,
    CrashedError: Status::CRASHED,
    MalformedError: Status::MALFORMED,
    ShuttingDownError: Status::SHUTTING_DOWN,
    ServiceError: Status::SERVICE_ERROR,
    TooLargeError: Status::TOO_LARGE,
    InvalidArgumentError: Status::INVALID_ARGUMENT,
    UnsupportedVersionError: Status::UNSUPPORTED_VERSION,
    UnauthorizedError: Status::UNAUTHORIZED,
    ProtocolError: Status::PROTOCOL,
    UnavailableError: Status::UNAVAILABLE
  }.each do |class_name, code|
    klass = Class.new(Error)
    klass.const_set(:STATUS, code)
    const_set(class_name, klass)
    Error::BY_STATUS[code] = klass
  end
  Error::BY_STATUS.freeze

  # The connection to the core ended (the core stopped or closed it).
  class ConnectionClosed < ShuttingDownError; end
end
