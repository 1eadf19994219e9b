# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
$LOAD_PATH.unshift(__dir__)
require "minitest/autorun"
require "json"
require "fileutils"
require "cumulo"

VECTORS_DIR = File.expand_path("../../../proto/vectors", __dir__)

def hex_bytes(hex)
  [hex].pack("H*")
end
