%% Faulty service: /tests/faulty/erlang/boom raises, /ok answers "ok".
-module(faulty).
-export([main/0]).

main() ->
    spawn(fun() ->
        Result = cumulo:run(fun(Api) ->
            ok = cumulo:subscribe(Api, "boom", fun(_, _) -> error({faulty_error, <<"boom from erlang">>}) end),
            ok = cumulo:subscribe(Api, "ok", fun(_, _) -> <<"ok">> end)
        end),
        halt(case Result of ok -> 0; _ -> 1 end)
    end).
