# frozen_string_literal: true

require_relative "test_helper"
require "fake_core"

# Runs examples/http_req/ruby as a real managed process against the fake core.
class ExampleTest < Minitest::Test
  EXAMPLE = File.expand_path("../../../examples/http_req/ruby/http_req.rb", __dir__)
  XML_INFO = "content-type\0text/xml; charset=utf-8\0".b
  NO_VALUE = "<http_test><error>no value specified</error></http_test>"
  CASES = {
    "value\00042\0" => "<http_test><value>42</value></http_test>",
    "value\0+007\0" => "<http_test><value>7</value></http_test>",
    "value\0-3\0" => "<http_test><value>-3</value></http_test>",
    "value\0-0\0" => "<http_test><value>0</value></http_test>",
    "value\0009223372036854775807\0" => "<http_test><value>9223372036854775807</value></http_test>",
    "a\0b\0value\0-9223372036854775808\0" => "<http_test><value>-9223372036854775808</value></http_test>",
    "value\0009223372036854775808\0" => NO_VALUE,
    "value\0004x\0" => NO_VALUE,
    "value\0\0" => NO_VALUE,
    "other\0001\0" => NO_VALUE,
    "value\00042" => NO_VALUE,
    "" => NO_VALUE
  }.freeze

  def test_http_req_example_answers_on_every_thread
    answers = []
    hellos = []
    core = FakeCore.new do |c|
      peers = Array.new(2) do
        peer, hello = c.accept_instance(prefix: "/tests/http_req/")
        hellos << hello
        peer.reply(:subscribe, "ruby.xml/get")
        peer
      end
      CASES.each_key.with_index do |body, index|
        peer = peers[index % 2]
        tid = [index + 1, 3, 9].pack("Q>NN")
        peer.send_frame(:request, trans_id: tid, timeout: 1000, priority: 0, flags: 1, source: 0,
                                  name: "/tests/http_req/ruby.xml/get", pattern: "/tests/http_req/ruby.xml/get",
                                  request_info: "", request: body)
        answers << peer.expect(:return).values_at(:status, :response_info, :response)
      end
      peers.each { |peer| peer.send_frame(:terminate, timeout: 100) }
    end
    env = { "CUMULO_SOCKET" => core.path, "CUMULO_TOKEN" => "token", "CUMULO_THREAD_COUNT" => "2" }
    pid = Process.spawn(env, RbConfig.ruby, EXAMPLE)
    core.join
    _, status = Process.wait2(pid)

    assert status.success?, "the example exits cleanly after TERMINATE"
    assert_equal %w[token token], hellos.map { |hello| hello[:token] }
    assert_equal CASES.values.map { |xml| [0, XML_INFO, xml] }, answers
  ensure
    if pid && !status
      Process.kill("KILL", pid)
      Process.wait(pid)
    end
  end
end
