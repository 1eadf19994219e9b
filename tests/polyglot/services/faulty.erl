%% Faulty service: /tests/faulty/erlang/boom raises, /ok answers "ok".
%% trace_sync, trace_async, trace_mcast, trace_forward call /echo/trace with
%% an empty request_info and answer what it got (PROTOCOL.md 5.1: the
%% handler's calls carry its request's trace context).
-module(faulty).
-export([main/0]).

main() ->
    spawn(fun() ->
        Result = cumulo:run(fun(Api) ->
            ok = cumulo:subscribe(Api, "boom", fun(_, _) -> error({faulty_error, <<"boom from erlang">>}) end),
            ok = cumulo:subscribe(Api, "ok", fun(_, _) -> <<"ok">> end),
            ok = cumulo:subscribe(Api, "trace_sync", fun(A, _) ->
                {ok, Info, _} = cumulo:send_sync(A, "/echo/trace", <<>>),
                Info
            end),
            ok = cumulo:subscribe(Api, "trace_async", fun(A, _) ->
                {ok, T} = cumulo:send_async(A, "/echo/trace", <<>>),
                {ok, _, Info, _} = cumulo:recv_async(A, #{trans_id => T}),
                Info
            end),
            ok = cumulo:subscribe(Api, "trace_mcast", fun(A, _) ->
                {ok, [T | _]} = cumulo:mcast_async(A, "/echo/trace", <<>>),
                {ok, _, Info, _} = cumulo:recv_async(A, #{trans_id => T}),
                Info
            end),
            ok = cumulo:subscribe(Api, "trace_forward", fun(A, Req) ->
                ok = cumulo:forward(A, Req, "/echo/trace", #{request_info => <<>>})
            end)
        end),
        halt(case Result of ok -> 0; _ -> 1 end)
    end).
