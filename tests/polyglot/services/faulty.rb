# frozen_string_literal: true

# Faulty service: /tests/faulty/ruby/boom raises, /ok answers "ok".
# trace_* call the echo service with an empty request_info and answer with
# the request_info it got (test_trace.py, PROTOCOL.md 5.1).
require_relative "../../../sdk/ruby/lib/cumulo"

class FaultyError < StandardError; end

ECHO = "/echo/trace"

Cumulo.run do |api|
  api.subscribe("boom") { |_req| raise FaultyError, "boom from ruby" }
  api.subscribe("ok") { |_req| "ok" }
  api.subscribe("trace_sync") { |_req| api.send_sync(ECHO, "", request_info: "")[0] }
  api.subscribe("trace_async") { |_req| api.recv_async(api.send_async(ECHO, "", request_info: "")).response_info }
  api.subscribe("trace_mcast") do |_req|
    api.recv_async(api.mcast_async(ECHO, "", request_info: "").first).response_info
  end
  api.subscribe("trace_forward") { |req| api.forward(req, ECHO, request_info: "") }
end
