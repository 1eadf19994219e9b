# frozen_string_literal: true

module Cumulo
  # Runs a whole service process: one thread and one instance per
  # CUMULO_THREAD_COUNT, each set up by the block and then polled until the
  # core sends TERMINATE (or goes away).
  module Runner
    module_function

    def run(thread_count: Integer(ENV.fetch("CUMULO_THREAD_COUNT", "1")), **options, &setup)
      raise ArgumentError, "Cumulo.run needs a setup block" unless setup

      threads = Array.new(thread_count) do |thread_index|
        Thread.new { serve(thread_index, options, setup) }
      end
      threads.each(&:join)
      nil
    end

    def serve(thread_index, options, setup)
      api = API.new(thread_index, **options)
      setup.call(api)
      nil while api.poll
    rescue ConnectionClosed
      nil # the core went away: nothing left to serve
    ensure
      api&.close
    end
  end

  def self.run(...)
    Runner.run(...)
  end
end
