#!/usr/bin/env ruby
# frozen_string_literal: true

# The http_req example service (docs/SDK_GUIDE.md): answers ruby.xml/get with
# the integer found under the key "value" of the key/value request body.
require_relative "../../../sdk/ruby/lib/cumulo"

INTEGER = /\A[+-]?[0-9]+\z/
INT64 = (-(2**63))..((2**63) - 1)
RESPONSE_INFO = { "content-type" => "text/xml; charset=utf-8" }.freeze

def http_req_answer(body)
  value = begin
    Cumulo::Info.lookup(body, "value")
  rescue Cumulo::MalformedError
    nil
  end
  number = value&.match?(INTEGER) && value.to_i
  if number && INT64.cover?(number)
    "<http_test><value>#{number}</value></http_test>"
  else
    "<http_test><error>no value specified</error></http_test>"
  end
end

# HTTP_REQ_WINDOW: requests the core may deliver at once (default 1); with
# more, one read brings several, answered in turn without a round trip each.
# Anything but a positive integer stops the process.
def http_req_window
  text = ENV.fetch("HTTP_REQ_WINDOW", "")
  return 1 if text.empty?
  return text.to_i if text.match?(/\A[0-9]+\z/) && text.to_i.between?(1, 0xffffffff)

  warn "http_req: HTTP_REQ_WINDOW='#{text}' is not a positive integer"
  exit 2
end

if $PROGRAM_NAME == __FILE__
  Cumulo.run(window: http_req_window) do |api|
    api.subscribe("ruby.xml/get") { |req| [RESPONSE_INFO, http_req_answer(req.request)] }
  end
end
