%% {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
%% answers "hello from {{name}}", with the request's "value" parameter when
%% it has one. One instance (an Erlang process) per CUMULO_THREAD_COUNT.
-module({{name}}).
-export([main/0]).

%% Run by `erl -s {{name}} main`: serves until the core stops it.
main() ->
    spawn(fun() ->
        Setup = fun(Api) -> ok = cumulo:subscribe(Api, "{{name}}/get", fun(_, #{request := Body}) -> answer(Body) end) end,
        case cumulo:run(Setup) of
            ok -> halt(0);
            {error, Reasons} -> io:format(standard_error, "{{name}}: ~p~n", [Reasons]), halt(1)
        end
    end).

%% Malformed key/value bytes are answered as if there were no value.
answer(Body) ->
    Text = #{<<"content-type">> => <<"text/plain; charset=utf-8">>},
    case cumulo_info:lookup(Body, <<"value">>) of
        undefined -> {Text, <<"hello from {{name}}">>};
        Value -> {Text, [<<"hello from {{name}} (value ">>, Value, <<")">>]}
    end.
