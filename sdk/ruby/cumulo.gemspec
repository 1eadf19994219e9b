# frozen_string_literal: true

require_relative "lib/cumulo"

Gem::Specification.new do |spec|
  spec.name = "cumulo"
  spec.version = Cumulo::VERSION
  spec.summary = "cumulo SDK: services in Ruby for the cumulo service cloud"
  spec.description = "Speaks the cumulo wire protocol v1 to the cumulo core: subscribe handlers, " \
                     "send requests synchronously or asynchronously, multicast, forward."
  spec.authors = ["cumulo"]
  spec.files = Dir["lib/**/*.rb"] + ["README.md"]
  spec.require_paths = ["lib"]
  spec.required_ruby_version = ">= 3.0"
  spec.add_development_dependency "minitest", ">= 5.0"
end
