# frozen_string_literal: true

# Unmanaged client: ruby client.rb SOCKET NAME HEX_BODY [sync|async]
# Prints the hex response_info, a newline and the response body; on an error
# status prints its name, a newline and the message, and exits 3.
require_relative "../../../sdk/ruby/lib/cumulo"

socket, name, body_hex, mode = ARGV
body = [body_hex].pack("H*")
api = Cumulo::API.new(socket: socket, prefix: "/client/ruby/")
$stdout.binmode
exit_code = 0
begin
  if mode == "async"
    r = api.recv_async(api.send_async(name, body))
    info, response = r.response_info, r.response
  else
    info, response = api.send_sync(name, body)
  end
  $stdout.write(info.unpack1("H*"), "\n", response)
rescue Cumulo::ConnectionClosed
  raise
rescue Cumulo::Error => e
  $stdout.write(e.status_name, "\n", e.message)
  exit_code = 3
ensure
  api.close
end
exit exit_code
