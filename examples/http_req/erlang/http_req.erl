%% The http_req example service (docs/SDK_GUIDE.md): answers erlang.xml/get
%% with the integer found under the key "value" of the key/value request
%% body. One instance (an Erlang process) per CUMULO_THREAD_COUNT.
-module(http_req).
-export([main/0, answer/1]).

-define(RESPONSE_INFO, <<"content-type", 0, "text/xml; charset=utf-8", 0>>).
-define(NO_VALUE, <<"<http_test><error>no value specified</error></http_test>">>).

%% Run by `erl -s http_req main`: serves until TERMINATE, then halts (0).
main() ->
    spawn(fun() ->
        Window = window(os:getenv("HTTP_REQ_WINDOW", "")),
        Setup = fun(Api) -> ok = cumulo:subscribe(Api, "erlang.xml/get", fun(_, #{request := Body}) -> answer(Body) end) end,
        case cumulo:run(Setup, #{window => Window}) of
            ok -> halt(0);
            {error, Reasons} -> io:format(standard_error, "http_req: ~p~n", [Reasons]), halt(1)
        end
    end).

%% HTTP_REQ_WINDOW: requests the core may deliver at once (default 1);
%% anything but a positive integer stops the process.
window("") -> 1;
window(Text) ->
    case re:run(Text, "\\A[0-9]+\\z", [{capture, none}]) of
        match ->
            case list_to_integer(Text) of
                N when N >= 1, N =< 16#FFFFFFFF -> N;
                _ -> bad_window(Text)
            end;
        nomatch -> bad_window(Text)
    end.

bad_window(Text) ->
    io:format(standard_error, "http_req: HTTP_REQ_WINDOW='~ts' is not a positive integer~n", [Text]),
    halt(2).

%% {ResponseInfo, Response} for a request body.
answer(Body) ->
    case integer(cumulo_info:lookup(Body, <<"value">>)) of
        undefined -> {?RESPONSE_INFO, ?NO_VALUE};
        N -> {?RESPONSE_INFO, <<"<http_test><value>", (integer_to_binary(N))/binary, "</value></http_test>">>}
    end.

%% An optionally signed ASCII decimal that fits in a signed 64-bit integer
%% (binary_to_integer/1 takes exactly that syntax: no blanks, no base).
integer(undefined) -> undefined;
integer(Text) ->
    try binary_to_integer(Text) of
        N when N >= -(1 bsl 63), N < 1 bsl 63 -> N;
        _ -> undefined
    catch
        error:badarg -> undefined
    end.
