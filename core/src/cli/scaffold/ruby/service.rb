# frozen_string_literal: true

# {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
# answers "hello from {{name}}", with the request's "value" parameter when it
# has one. Runs CUMULO_THREAD_COUNT instances, one per thread.
require "{{sdk}}/ruby/lib/cumulo"

TEXT = { "content-type" => "text/plain; charset=utf-8" }.freeze

def answer(body)
  value = begin
    Cumulo::Info.lookup(body, "value")
  rescue Cumulo::MalformedError
    nil # answered as if there were no value
  end
  value ? "hello from {{name}} (value #{value})" : "hello from {{name}}"
end

Cumulo.run do |api|
  api.subscribe("{{name}}/get") { |req| [TEXT, answer(req.request)] }
end
