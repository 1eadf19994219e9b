#!/usr/bin/env ruby
# frozen_string_literal: true

# The users API in Ruby: GET /v1/users through the HTTP gateway (the gateway
# names it /v1/users/get) answers a fixed JSON list of users, 36 bytes.
begin
  require "cumulo"
rescue LoadError # not installed: the SDK of this source tree
  require_relative "../../../sdk/ruby/lib/cumulo"
end

USERS = '{"users":[{"id":1,"name":"alicia"}]}'
RESPONSE_INFO = { "content-type" => "application/json" }.freeze

if $PROGRAM_NAME == __FILE__
  Cumulo.run do |api|
    api.subscribe("users/get") { |_req| [RESPONSE_INFO, USERS] }
  end
end
