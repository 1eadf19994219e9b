# frozen_string_literal: true

# cumulo SDK: a service instance speaking the cumulo wire protocol v1.
module Cumulo
  VERSION = "0.1.0"
end

require_relative "cumulo/errors"
require_relative "cumulo/info"
require_relative "cumulo/codec"
require_relative "cumulo/request"
require_relative "cumulo/connection"
require_relative "cumulo/api"
require_relative "cumulo/runner"
