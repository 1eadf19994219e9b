%% Unmanaged client: erl -noshell -s client main -extra SOCKET NAME HEX_BODY [sync|async]
%% Prints the hex response_info, a newline and the response body; on an error
%% status prints its name, a newline and the message, and exits 3.
-module(client).
-export([main/0]).

main() ->
    spawn(fun() ->
        Code = try run(init:get_plain_arguments())
               catch C:R:S -> io:format(standard_error, "client: ~p:~p ~p~n", [C, R, S]), 1
               end,
        halt(Code)
    end).

run([Socket, Name, HexBody | Mode]) ->
    Body = binary:decode_hex(list_to_binary(HexBody)),
    {ok, Api} = cumulo:new(#{socket => Socket, token => "", prefix => "/client/erlang/"}),
    Result = case Mode of
                 ["async"] ->
                     case cumulo:send_async(Api, Name, Body) of
                         {ok, TransId} ->
                             case cumulo:recv_async(Api, #{trans_id => TransId}) of
                                 {ok, _, Info, Response} -> {ok, Info, Response};
                                 Error -> Error
                             end;
                         Error -> Error
                     end;
                 _ -> cumulo:send_sync(Api, Name, Body)
             end,
    cumulo:close(Api),
    case Result of
        {ok, Info1, Response1} ->
            out([string:lowercase(binary:encode_hex(Info1)), "\n", Response1]),
            0;
        {error, {Status, Message}} ->
            out([cumulo:status_name(Status), "\n", Message]),
            3
    end.

out(Bytes) -> ok = file:write(standard_io, Bytes).
