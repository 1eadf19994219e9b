# frozen_string_literal: true

# Faulty service: /tests/faulty/ruby/boom raises, /ok answers "ok".
require_relative "../../../sdk/ruby/lib/cumulo"

class FaultyError < StandardError; end

Cumulo.run do |api|
  api.subscribe("boom") { |_req| raise FaultyError, "boom from ruby" }
  api.subscribe("ok") { |_req| "ok" }
end
