%% The cumulo API: one instance, one connection to the core (protocol v1,
%% proto/PROTOCOL.md; the calls of docs/SDK_GUIDE.md).
%%
%% An instance belongs to the process that created it (as a socket belongs
%% to its owner): its calls, and its handlers, run in that process, which
%% keeps the instance's state in its process dictionary. run/1,2 starts
%% one such process per instance under the cumulo application's supervisor.
%%
%% Calls return {ok, ...} or {error, {Status, Message}}: Status is the
%% lower-case name of a status code of PROTOCOL 2.3 (timeout, no_service,
%% service_error, ...), or the code itself when it is unknown.
-module(cumulo).

-export([new/1, close/1]).
-export([subscribe/3, unsubscribe/2, subscribe_count/2]).
-export([send_async/3, send_async/4, send_sync/3, send_sync/4, mcast_async/3, mcast_async/4]).
-export([recv_async/1, recv_async/2, forward/3, forward/4]).
-export([poll/1, poll/2, run/1, run/2]).
-export([process_index/1, process_count/1, thread_count/1, thread_index/1, prefix/1,
         timeout_async/1, timeout_sync/1, timeout_terminate/1, priority_default/1,
         node_id/1, instance_id/1, window/1, max_frame/1, keepalive/1]).
-export([info_encode/1, info_parse/1]).
-export([status_name/1, status_code/1, is_terminated/1]).

-export_type([api/0, request/0, error/0, handler/0]).

-opaque api() :: {cumulo_api, reference()}.
-type status() :: atom() | non_neg_integer().
-type error() :: {status(), binary()}.
%% #{trans_id, timeout, priority, flags, source, name, pattern,
%%   request_info, request, sync, mcast}
-type request() :: #{atom() => term()}.
%% What a handler returns: the response, or {ResponseInfo, Response}
%% (ResponseInfo as bytes, a list of pairs or a map). After forward/3,4
%% the value is ignored.
-type handler() :: fun((api(), request()) -> iodata() | {iodata() | list() | map(), iodata()} | term()).

-define(WAIT_FOR_SERVICE, 1).
-define(REQUEST_OVERHEAD, (8 + 2 + 16#ffff)).
-define(GRACE_MS, 1000).
-define(HANDSHAKE_TIMEOUT_MS, 30000).
-define(SLOW_HANDLER_US, 1000).
-define(DEFAULT_MAX_FRAME, (8 * 1024 * 1024)).
%% The socket is in {active, N} mode: the runtime delivers what arrives as
%% messages to the owning process, N at a time before it must be re-armed.
%% A socket that stays active is polled by the schedulers themselves instead
%% of the runtime's poll thread, which spares each request a thread hand-off
%% (a window-1 service: 59 -> 45 us of CPU per request, docs/benchmarks/gateway-connections.md).
%% What the core sends is bounded by
%% the window and by the instance's own sends, not by N.
-define(ACTIVE_N, 4096).

%% ------------------------------------------------------------ connecting

%% Connects, sends HELLO, waits for WELCOME. Options (all optional):
%% socket (default CUMULO_SOCKET: a path or "tcp://host:port"), token
%% (default CUMULO_TOKEN; none makes an unmanaged instance, which needs
%% prefix), prefix, thread_index (0), window (1), max_frame (read limit;
%% default WELCOME's max_frame plus what a REQUEST adds).
-spec new(map()) -> {ok, api()} | {error, error()}.
new(Options) ->
    Token = to_bin(maps:get(token, Options, os:getenv("CUMULO_TOKEN", ""))),
    Prefix = case Token of
                 <<>> -> to_bin(maps:get(prefix, Options, ""));
                 _ -> <<>>
             end,
    case {Token, Prefix} of
        {<<>>, <<"/", _/binary>>} -> connect(Token, Prefix, Options);
        {<<>>, _} -> {error, {invalid_argument, <<"an unmanaged instance needs a prefix starting with '/'">>}};
        _ -> connect(Token, Prefix, Options)
    end.

connect(Token, Prefix, Options) ->
    case to_list(maps:get(socket, Options, os:getenv("CUMULO_SOCKET", ""))) of
        "" -> {error, {invalid_argument, <<"no socket given and CUMULO_SOCKET is not set">>}};
        Address -> connect(Token, Prefix, Options, Address)
    end.

connect(Token, Prefix, Options, Address) ->
    case open(Address) of
        {ok, Sock} ->
            Api = {cumulo_api, make_ref()},
            put_state(Api, #{sock => Sock, buf => <<>>, out => [], welcome => #{},
                             thread_index => maps:get(thread_index, Options, 0),
                             read_limit => maps:get(max_frame, Options, undefined),
                             max_frame => ?DEFAULT_MAX_FRAME, handlers => #{}, queue => queue:new(),
                             responses => #{}, order => [], abandoned => #{}, forwarded => #{},
                             req_id => 0, last_ns => 0, terminated => false, slow => false,
                             trace => []}),
            Hello = #{version => 1, window => maps:get(window, Options, 1),
                      thread_index => maps:get(thread_index, Options, 0), token => Token, prefix => Prefix},
            case catch_errors(fun() -> handshake(Api, Hello) end) of
                ok -> {ok, Api};
                {error, _} = Error ->
                    close_socket(Sock),
                    erase({cumulo, element(2, Api)}),
                    Error
            end;
        {error, Reason} ->
            {error, {shutting_down, iolist_to_binary(io_lib:format("cannot connect to ~ts: ~p", [Address, Reason]))}}
    end.

open("tcp://" ++ HostPort) ->
    {Host, [$: | Port]} = lists:splitwith(fun(C) -> C =/= $: end, lists:reverse(HostPort)),
    gen_tcp:connect(lists:reverse(Port), list_to_integer(lists:reverse(Host)),
                    [binary, {active, ?ACTIVE_N}, {packet, raw}, {nodelay, true}]);
open(Path) ->
    gen_tcp:connect({local, Path}, 0, [local, binary, {active, ?ACTIVE_N}, {packet, raw}]).

handshake(Api, Hello) ->
    write(Api, 'HELLO', Hello),
    case next_frame(Api, deadline(?HANDSHAKE_TIMEOUT_MS, 0)) of
        timeout -> throw({cumulo_error, timeout, <<"no WELCOME from the core">>});
        {'WELCOME', W} -> update(Api, #{welcome => W, max_frame => maps:get(max_frame, W)});
        {'ERROR', #{status := S, message := M}} -> throw({cumulo_error, status_atom(S), M});
        {Type, _} -> throw({cumulo_error, protocol, <<"expected WELCOME, got ", (atom_to_binary(Type))/binary>>})
    end.

%% Writes what is still queued, then GOODBYE, and closes.
-spec close(api()) -> ok.
close(Api) ->
    case get({cumulo, element(2, Api)}) of
        undefined -> ok;
        #{sock := Sock} ->
            _ = catch_errors(fun() -> write(Api, 'GOODBYE', #{}) end),
            close_socket(Sock),
            erase({cumulo, element(2, Api)}),
            ok
    end.

%% ------------------------------------------------------------ subscriptions

%% Subscribes Pattern (relative to the prefix); Handler serves its requests.
-spec subscribe(api(), iodata(), handler()) -> ok | {error, error()}.
subscribe(Api, Pattern, Handler) when is_function(Handler, 2) ->
    catch_errors(fun() ->
        _ = control(Api, 'SUBSCRIBE', Pattern),
        #{handlers := H} = S = state(Api),
        put_state(Api, S#{handlers => H#{full_pattern(Api, Pattern) => Handler}}),
        ok
    end).

-spec unsubscribe(api(), iodata()) -> ok | {error, error()}.
unsubscribe(Api, Pattern) ->
    catch_errors(fun() ->
        _ = control(Api, 'UNSUBSCRIBE', Pattern),
        case control(Api, 'SUBSCRIBE_COUNT', Pattern) of
            0 ->
                #{handlers := H} = S = state(Api),
                put_state(Api, S#{handlers => maps:remove(full_pattern(Api, Pattern), H)});
            _ -> ok
        end,
        ok
    end).

-spec subscribe_count(api(), iodata()) -> {ok, non_neg_integer()} | {error, error()}.
subscribe_count(Api, Pattern) ->
    catch_errors(fun() -> {ok, control(Api, 'SUBSCRIBE_COUNT', Pattern)} end).

full_pattern(Api, Pattern) -> <<(prefix(Api))/binary, (to_bin(Pattern))/binary>>.

control(Api, Type, Pattern) ->
    #{req_id := Last} = S = state(Api),
    ReqId = (Last + 1) band 16#ffffffff,
    put_state(Api, S#{req_id => ReqId}),
    write(Api, Type, #{req_id => ReqId, pattern => to_bin(Pattern)}),
    case await(Api, undefined, fun('REPLY', #{req_id := Id} = F) when Id =:= ReqId -> F;
                                  (_, _) -> false end) of
        #{status := 0, value := Value} -> Value;
        #{status := Status, message := Message} -> throw({cumulo_error, status_atom(Status), Message})
    end.

%% ------------------------------------------------------------ sending

%% Options of the sends: request_info (bytes, pairs or a map), timeout (ms;
%% 0 or absent: the core's default), priority, wait_for_service (boolean).
-spec send_async(api(), iodata(), iodata()) -> {ok, binary()} | {error, error()}.
send_async(Api, Name, Request) -> send_async(Api, Name, Request, #{}).

-spec send_async(api(), iodata(), iodata(), map()) -> {ok, binary()} | {error, error()}.
send_async(Api, Name, Request, Options) ->
    catch_errors(fun() -> {ok, send_request(Api, 'SEND_ASYNC', Name, Request, Options)} end).

%% {ok, ResponseInfo, Response}, or the error status of the RESPONSE.
-spec send_sync(api(), iodata(), iodata()) -> {ok, binary(), binary()} | {error, error()}.
send_sync(Api, Name, Request) -> send_sync(Api, Name, Request, #{}).

-spec send_sync(api(), iodata(), iodata(), map()) -> {ok, binary(), binary()} | {error, error()}.
send_sync(Api, Name, Request, Options) ->
    catch_errors(fun() ->
        TransId = send_request(Api, 'SEND_SYNC', Name, Request, Options),
        Timeout = timeout_or(Options, timeout_sync(Api)),
        case await(Api, deadline(Timeout, ?GRACE_MS), fun('RESPONSE', #{trans_id := T} = F) when T =:= TransId -> F;
                                                         (_, _) -> false end) of
            timeout ->
                #{abandoned := A} = S = state(Api),
                put_state(Api, S#{abandoned => A#{TransId => true}}),
                {error, {timeout, iolist_to_binary(["no response to ", Name, " in time"])}};
            Response -> answer(Response)
        end
    end).

%% Sends a copy to every instance subscribed to a pattern matching Name:
%% {ok, TransIds} of the copies (collect their answers with recv_async).
-spec mcast_async(api(), iodata(), iodata()) -> {ok, [binary()]} | {error, error()}.
mcast_async(Api, Name, Request) -> mcast_async(Api, Name, Request, #{}).

-spec mcast_async(api(), iodata(), iodata(), map()) -> {ok, [binary()]} | {error, error()}.
mcast_async(Api, Name, Request, Options) ->
    catch_errors(fun() ->
        TransId = send_request(Api, 'MCAST_ASYNC', Name, Request, Options),
        Timeout = timeout_or(Options, timeout_async(Api)),
        case await(Api, deadline(Timeout, ?GRACE_MS), fun('MCAST_SENT', #{trans_id := T} = F) when T =:= TransId -> F;
                                                         (_, _) -> false end) of
            timeout -> {error, {timeout, iolist_to_binary(["no MCAST_SENT for ", Name, " in time"])}};
            #{trans_ids := TransIds} -> {ok, TransIds}
        end
    end).

%% The RESPONSE of an asynchronous send: Options trans_id (default: the next
%% one to arrive, of any send) and timeout (ms, default timeout_async).
%% {ok, TransId, ResponseInfo, Response}, or its error status.
-spec recv_async(api()) -> {ok, binary(), binary(), binary()} | {error, error()}.
recv_async(Api) -> recv_async(Api, #{}).

-spec recv_async(api(), map()) -> {ok, binary(), binary(), binary()} | {error, error()}.
recv_async(Api, Options) ->
    catch_errors(fun() ->
        Wanted = maps:get(trans_id, Options, undefined),
        Found = case take_response(Api, Wanted) of
                    undefined ->
                        Timeout = timeout_or(Options, timeout_async(Api)),
                        await(Api, deadline(Timeout, ?GRACE_MS),
                              fun('RESPONSE', #{trans_id := T} = F) when Wanted =:= undefined; T =:= Wanted -> F;
                                 (_, _) -> false end);
                    F -> F
                end,
        case Found of
            timeout -> {error, {timeout, <<"no response received in time">>}};
            #{trans_id := T} = Response ->
                case answer(Response) of
                    {ok, Info, Body} -> {ok, T, Info, Body};
                    Error -> Error
                end
        end
    end).

%% From a handler: passes Request on to Name. Options request_info,
%% request, timeout, priority default to the request's own. The handler's
%% return value is then ignored.
-spec forward(api(), request(), iodata()) -> ok | {error, error()}.
forward(Api, Request, Name) -> forward(Api, Request, Name, #{}).

-spec forward(api(), request(), iodata(), map()) -> ok | {error, error()}.
forward(Api, #{trans_id := TransId} = Request, Name, Options) ->
    catch_errors(fun() ->
        write(Api, 'FORWARD', #{trans_id => TransId,
                                timeout => maps:get(timeout, Options, maps:get(timeout, Request)),
                                priority => maps:get(priority, Options, maps:get(priority, Request)),
                                flags => 0, name => to_bin(Name),
                                request_info => with_trace(Api, info_bytes(maps:get(request_info, Options,
                                                                                    maps:get(request_info, Request)))),
                                request => maps:get(request, Options, maps:get(request, Request))}),
        #{forwarded := F} = S = state(Api),
        put_state(Api, S#{forwarded => F#{TransId => true}}),
        ok
    end).

send_request(Api, Type, Name, Request, Options) ->
    TransId = new_trans_id(Api),
    Flags = case maps:get(wait_for_service, Options, false) of
                true -> ?WAIT_FOR_SERVICE;
                false -> 0
            end,
    write(Api, Type, #{trans_id => TransId, timeout => maps:get(timeout, Options, 0),
                       priority => maps:get(priority, Options, priority_default(Api)), flags => Flags,
                       name => to_bin(Name),
                       request_info => with_trace(Api, info_bytes(maps:get(request_info, Options, <<>>))),
                       request => Request}),
    TransId.

%% PROTOCOL 2.2: ns since the epoch (strictly increasing), node_id, instance_id.
new_trans_id(Api) ->
    #{last_ns := Last, welcome := #{node_id := Node, instance_id := Instance}} = S = state(Api),
    Now = max(os:system_time(nanosecond), Last + 1),
    put_state(Api, S#{last_ns => Now}),
    <<Now:64/big, Node:32/big, Instance:32/big>>.

answer(#{status := 0, response_info := Info, response := Body}) -> {ok, Info, Body};
answer(#{status := Status, response := Message}) -> {error, {status_atom(Status), Message}}.

take_response(Api, Wanted) ->
    #{responses := R, order := Order} = S = state(Api),
    Key = case {Wanted, Order} of
              {undefined, [First | _]} -> First;
              _ -> Wanted
          end,
    case maps:take(Key, R) of
        {F, R1} ->
            put_state(Api, S#{responses => R1, order => lists:delete(Key, Order)}),
            F;
        error -> undefined
    end.

timeout_or(Options, Default) ->
    case maps:get(timeout, Options, 0) of
        0 -> Default;
        T -> T
    end.

%% ------------------------------------------------------------ serving

%% The event loop: reads frames, runs handlers, answers PING, keeps
%% RESPONSEs. false once TERMINATE arrived (after finishing the requests
%% already delivered), true when Timeout (ms or infinity) passed first,
%% {error, _} when the connection failed.
-spec poll(api()) -> boolean() | {error, error()}.
poll(Api) -> poll(Api, infinity).

-spec poll(api(), timeout()) -> boolean() | {error, error()}.
poll(Api, Timeout) ->
    Deadline = case Timeout of
                   infinity -> undefined;
                   _ -> deadline(Timeout, 0)
               end,
    catch_errors(fun() -> poll_loop(Api, Deadline) end).

poll_loop(Api, Deadline) ->
    #{queue := Q} = S = state(Api),
    case queue:out(Q) of
        {{value, Request}, Q1} ->
            put_state(Api, S#{queue => Q1}),
            case S of
                #{slow := true} -> flush(Api);
                _ -> ok
            end,
            Started = erlang:monotonic_time(microsecond),
            handle(Api, Request),
            Slow = erlang:monotonic_time(microsecond) - Started > ?SLOW_HANDLER_US,
            update(Api, #{slow => Slow}),
            poll_loop(Api, Deadline);
        {empty, _} when map_get(terminated, S) ->
            flush(Api),
            false;
        {empty, _} ->
            case next_frame(Api, Deadline) of
                timeout -> flush(Api), true;
                {Type, Fields} -> background(Api, Type, Fields), poll_loop(Api, Deadline)
            end
    end.

-spec is_terminated(api()) -> boolean().
is_terminated(Api) -> map_get(terminated, state(Api)).

handle(Api, #{trans_id := TransId, pattern := Pattern} = Request) ->
    #{handlers := Handlers} = state(Api),
    {Status, Info, Body} =
        case Handlers of
            #{Pattern := Handler} -> run_handler(Api, Handler, Request);
            _ -> {status_code(no_service), <<>>, <<"no handler for ", Pattern/binary>>}
        end,
    #{forwarded := F} = S = state(Api),
    case maps:take(TransId, F) of
        {_, F1} -> put_state(Api, S#{forwarded => F1});
        error -> queue_return(Api, TransId, Status, Info, Body)
    end.

run_handler(Api, Handler, Request) ->
    Trace = trace_of(Request),
    Trace =:= [] orelse update(Api, #{trace => Trace}),
    try
        Result = Handler(Api, Request),
        case forwarded(Api, Request) of
            true -> {0, <<>>, <<>>};    % not returned: ignored
            false -> answer_of(Result)
        end
    catch
        Class:Reason:Stack -> {status_code(service_error), <<>>, describe(Class, Reason, Stack)}
    after
        Trace =:= [] orelse clear_trace(Api)
    end.

%% Trace context (proto/PROTOCOL.md 5.1): while a handler runs for R, the
%% sends and forwards it makes without a traceparent key get R's traceparent
%% (and tracestate) appended. It is kept in the instance's state (key trace):
%% an instance belongs to one process, whose handlers run one at a time, so
%% the state holds at most one handler's context.
trace_of(#{request_info := Info}) ->
    %% The common case, a request without one, is found without parsing.
    case binary:match(Info, <<"traceparent", 0>>) =/= nomatch andalso cumulo_info:parse(Info) of
        false -> [];
        {ok, Pairs} ->
            case lists:keyfind(<<"traceparent">>, 1, Pairs) of
                false -> [];
                Parent -> [Parent | [State || State <- [lists:keyfind(<<"tracestate">>, 1, Pairs)], State =/= false]]
            end;
        _ -> []
    end.

%% The handler may have closed the instance: nothing to clear then.
clear_trace(Api) ->
    case get({cumulo, element(2, Api)}) of
        undefined -> ok;
        S -> put_state(Api, S#{trace => []})
    end.

with_trace(Api, Info) ->
    case map_get(trace, state(Api)) of
        [] -> Info;
        Trace ->
            case cumulo_info:parse(Info) of
                {ok, Pairs} ->
                    case lists:keymember(<<"traceparent">>, 1, Pairs) of
                        true -> Info;
                        false -> <<Info/binary, (cumulo_info:encode(Trace))/binary>>
                    end;
                _ -> Info    % malformed: sent as it is, the core refuses it
            end
    end.

answer_of({Info, Body}) -> {0, info_bytes(Info), iolist_to_binary(Body)};
answer_of(Body) -> {0, <<>>, iolist_to_binary(Body)}.

forwarded(Api, #{trans_id := T}) -> maps:is_key(T, map_get(forwarded, state(Api))).

%% "error: Reason" (a text reason as text), and where it was raised.
describe(Class, Reason, Stack) ->
    Text = case Reason of
               B when is_binary(B) -> B;
               _ ->
                   case io_lib:printable_unicode_list(Reason) of
                       true -> unicode:characters_to_binary(Reason);
                       false -> iolist_to_binary(io_lib:format("~0tp", [Reason]))
                   end
           end,
    Where = case Stack of
                [{M, F, A, _} | _] when is_list(A) -> io_lib:format(" in ~s:~s/~b", [M, F, length(A)]);
                [{M, F, A, _} | _] -> io_lib:format(" in ~s:~s/~b", [M, F, A]);
                _ -> ""
            end,
    iolist_to_binary([atom_to_binary(Class), ": ", Text, Where]).

queue_return(Api, TransId, Status, Info, Body) ->
    Frame = cumulo_codec:encode('RETURN', #{trans_id => TransId, status => Status,
                                            response_info => Info, response => Body}),
    #{out := Out, max_frame := Max} = S = state(Api),
    case byte_size(Frame) - 4 > Max of
        false -> put_state(Api, S#{out => [Out | Frame]});
        true ->
            Message = iolist_to_binary(io_lib:format("the answer of ~b bytes is over max_frame ~b",
                                                     [byte_size(Frame) - 4, Max])),
            queue_return(Api, TransId, status_code(too_large), <<>>, Message)
    end.

%% A frame that is not the one awaited.
background(Api, 'PING', #{nonce := Nonce}) -> write(Api, 'PONG', #{nonce => Nonce});
background(Api, 'REQUEST', Fields) ->
    #{queue := Q} = S = state(Api),
    put_state(Api, S#{queue => queue:in(request(Fields), Q)});
background(Api, 'RESPONSE', #{trans_id := T} = Fields) ->
    #{abandoned := A, responses := R, order := Order} = S = state(Api),
    case maps:take(T, A) of
        {_, A1} -> put_state(Api, S#{abandoned => A1});
        error ->
            Order1 = case R of
                         #{T := _} -> Order;
                         _ -> Order ++ [T]
                     end,
            put_state(Api, S#{responses => R#{T => Fields}, order => Order1})
    end;
background(Api, 'TERMINATE', _) -> update(Api, #{terminated => true});
background(Api, 'ERROR', #{status := Status, message := Message}) ->
    close_socket(map_get(sock, state(Api))),
    throw({cumulo_error, status_atom(Status), Message});
background(_, Type, _) when Type =:= 'REPLY'; Type =:= 'MCAST_SENT'; Type =:= 'PONG' ->
    ok;    % answers nobody waits for any more
background(_, Type, _) ->
    throw({cumulo_error, protocol, <<"unexpected ", (atom_to_binary(Type))/binary, " from the core">>}).

request(#{flags := Flags} = F) -> F#{sync => Flags band 1 =/= 0, mcast => Flags band 2 =/= 0}.

%% Reads frames until Wanted returns one (returned) or the deadline passes
%% (timeout); every other frame is handled in the background.
await(Api, Deadline, Wanted) ->
    case next_frame(Api, Deadline) of
        timeout -> timeout;
        {'RESPONSE', #{trans_id := T}} = Frame ->
            #{abandoned := A} = S = state(Api),
            case maps:take(T, A) of
                {_, A1} -> put_state(Api, S#{abandoned => A1}), await(Api, Deadline, Wanted);
                error -> await_match(Api, Deadline, Wanted, Frame)
            end;
        Frame -> await_match(Api, Deadline, Wanted, Frame)
    end.

await_match(Api, Deadline, Wanted, {Type, Fields}) ->
    case Wanted(Type, Fields) of
        false -> background(Api, Type, Fields), await(Api, Deadline, Wanted);
        Found -> Found
    end.

%% ------------------------------------------------------------ the stream

%% The next frame {Type, Fields}, or timeout. Reads what the socket holds;
%% the queued RETURNs go out before the process waits for input.
next_frame(Api, Deadline) ->
    #{buf := Buf, read_limit := ReadLimit, max_frame := Max} = state(Api),
    Limit = case ReadLimit of
                undefined -> Max + ?REQUEST_OVERHEAD;
                _ -> ReadLimit
            end,
    case cumulo_codec:split(Buf, Limit) of
        {frame, Code, Body, Rest} ->
            update(Api, #{buf => Rest}),
            case cumulo_codec:decode_body(Code, Body) of
                {ok, Message} -> Message;
                {error, Status, Why} -> fail(Api, Status, Why)
            end;
        {error, Status, Why} -> fail(Api, Status, Why);
        more ->
            flush(Api),
            case read(Api, Buf, Deadline) of
                timeout -> timeout;
                ok -> next_frame(Api, Deadline)
            end
    end.

read(Api, Buf, Deadline) ->
    #{sock := Sock} = state(Api),
    %% What the frame being read still lacks (at least one byte): a large
    %% frame is gathered chunk by chunk and joined once.
    Need = case Buf of
               <<Length:32/little, _/binary>> -> max(1, Length + 4 - byte_size(Buf));
               _ -> 1
           end,
    case receive_bytes(Sock, Need, Deadline, []) of
        {ok, [Data]} when Buf =:= <<>> -> update(Api, #{buf => Data}), ok;
        {ok, Chunks} -> update(Api, #{buf => iolist_to_binary([Buf | Chunks])}), ok;
        {timeout, []} -> timeout;
        {timeout, Chunks} -> update(Api, #{buf => iolist_to_binary([Buf | Chunks])}), timeout;
        {error, closed} -> throw({cumulo_error, shutting_down, <<"the core closed the connection">>});
        {error, Reason} -> throw({cumulo_error, shutting_down, iolist_to_binary(io_lib:format("read: ~p", [Reason]))})
    end.

%% Receives the socket's data until Need bytes have come (the chunks in
%% order), or the deadline passes (timeout, with what came).
receive_bytes(Sock, Need, Deadline, Acc) ->
    Wait = case Deadline of
               undefined -> infinity;
               _ -> max(0, Deadline - erlang:monotonic_time(millisecond))
           end,
    receive
        {tcp, Sock, Data} when byte_size(Data) >= Need -> {ok, lists:reverse(Acc, [Data])};
        {tcp, Sock, Data} -> receive_bytes(Sock, Need - byte_size(Data), Deadline, [Data | Acc]);
        {tcp_passive, Sock} ->
            case inet:setopts(Sock, [{active, ?ACTIVE_N}]) of
                ok -> receive_bytes(Sock, Need, Deadline, Acc);
                {error, Reason} -> {error, Reason}
            end;
        {tcp_closed, Sock} -> {error, closed};
        {tcp_error, Sock, Reason} -> {error, Reason}
    after Wait -> {timeout, lists:reverse(Acc)}
    end.

%% Closes the socket and drops what it had already delivered to the mailbox.
close_socket(Sock) ->
    gen_tcp:close(Sock),
    drop_messages(Sock).

drop_messages(Sock) ->
    receive
        {tcp, Sock, _} -> drop_messages(Sock);
        {tcp_passive, Sock} -> drop_messages(Sock);
        {tcp_closed, Sock} -> drop_messages(Sock);
        {tcp_error, Sock, _} -> drop_messages(Sock)
    after 0 -> ok
    end.

%% After a bad frame the stream cannot be resynchronised: close.
fail(Api, Status, Why) ->
    close_socket(map_get(sock, state(Api))),
    throw({cumulo_error, Status, Why}).

%% Sends a frame after the queued RETURNs; refuses one over max_frame.
write(Api, Type, Fields) ->
    Frame = try cumulo_codec:encode(Type, Fields)
            catch error:_ -> throw({cumulo_error, invalid_argument, <<"a field is out of range or not UTF-8">>})
            end,
    #{out := Out, max_frame := Max, sock := Sock} = S = state(Api),
    byte_size(Frame) - 4 =< Max orelse
        throw({cumulo_error, too_large,
               iolist_to_binary(io_lib:format("a ~s frame of ~b bytes is over max_frame ~b",
                                              [Type, byte_size(Frame) - 4, Max]))}),
    put_state(Api, S#{out => []}),
    send(Sock, [Out | Frame]).

flush(Api) ->
    case state(Api) of
        #{out := []} -> ok;
        #{out := Out, sock := Sock} = S ->
            put_state(Api, S#{out => []}),
            send(Sock, Out)
    end.

send(Sock, Data) ->
    case gen_tcp:send(Sock, Data) of
        ok -> ok;
        {error, Reason} ->
            throw({cumulo_error, shutting_down, iolist_to_binary(io_lib:format("write: ~p", [Reason]))})
    end.

%% ------------------------------------------------------------ a process

%% Runs a whole service process: CUMULO_THREAD_COUNT instances (Options
%% thread_count), each an Erlang process under the cumulo application's
%% supervisor, each created with Options (see new/1), set up by Setup(Api)
%% (subscriptions) and then polled until TERMINATE. Returns when every
%% instance has finished: ok, or {error, Reasons}.
-spec run(fun((api()) -> term())) -> ok | {error, list()}.
run(Setup) -> run(Setup, #{}).

-spec run(fun((api()) -> term()), map()) -> ok | {error, list()}.
run(Setup, Options) ->
    try serve_instances(Setup, Options)
    catch Class:Reason -> {error, [{Class, Reason}]}
    end.

serve_instances(Setup, Options) ->
    Count = max(1, maps:get(thread_count, Options, list_to_integer(os:getenv("CUMULO_THREAD_COUNT", "1")))),
    {ok, _} = application:ensure_all_started(cumulo),
    Pids = [begin
                {ok, Pid} = cumulo_sup:start_instance(Options#{thread_index => I}, Setup),
                {Pid, monitor(process, Pid)}
            end || I <- lists:seq(0, Count - 1)],
    Failures = [Reason || {_, Ref} <- Pids, Reason <- [receive {'DOWN', Ref, process, _, R} -> R end],
                          Reason =/= normal],
    case Failures of
        [] -> ok;
        _ -> {error, Failures}
    end.

%% ------------------------------------------------------------ accessors

-spec process_index(api()) -> non_neg_integer().
process_index(Api) -> welcome(Api, process_index).
-spec process_count(api()) -> non_neg_integer().
process_count(Api) -> welcome(Api, process_count).
-spec thread_count(api()) -> non_neg_integer().
thread_count(Api) -> welcome(Api, thread_count).
-spec thread_index(api()) -> non_neg_integer().
thread_index(Api) -> map_get(thread_index, state(Api)).
-spec prefix(api()) -> binary().
prefix(Api) -> welcome(Api, prefix).
-spec timeout_async(api()) -> non_neg_integer().
timeout_async(Api) -> welcome(Api, timeout_async).
-spec timeout_sync(api()) -> non_neg_integer().
timeout_sync(Api) -> welcome(Api, timeout_sync).
-spec timeout_terminate(api()) -> non_neg_integer().
timeout_terminate(Api) -> welcome(Api, timeout_terminate).
-spec priority_default(api()) -> integer().
priority_default(Api) -> welcome(Api, priority_default).
-spec node_id(api()) -> non_neg_integer().
node_id(Api) -> welcome(Api, node_id).
-spec instance_id(api()) -> non_neg_integer().
instance_id(Api) -> welcome(Api, instance_id).
-spec window(api()) -> non_neg_integer().
window(Api) -> welcome(Api, window).
-spec max_frame(api()) -> non_neg_integer().
max_frame(Api) -> map_get(max_frame, state(Api)).
-spec keepalive(api()) -> non_neg_integer().
keepalive(Api) -> welcome(Api, keepalive).

welcome(Api, Key) -> map_get(Key, map_get(welcome, state(Api))).

%% ------------------------------------------------------------ key/value

%% See cumulo_info: encode pairs or a map; parse to {ok, Pairs} or an error.
-spec info_encode([{term(), term()}] | map()) -> binary().
info_encode(Pairs) -> cumulo_info:encode(Pairs).

-spec info_parse(binary()) -> {ok, [{binary(), binary()}]} | {error, {malformed, binary()}}.
info_parse(Bin) ->
    case cumulo_info:parse(Bin) of
        {ok, _} = Ok -> Ok;
        {error, Status, Why} -> {error, {Status, Why}}
    end.

info_bytes(Info) when is_binary(Info) -> Info;
info_bytes(Info) when is_map(Info) -> cumulo_info:encode(Info);
info_bytes([{_, _} | _] = Pairs) -> cumulo_info:encode(Pairs);
info_bytes(Info) -> iolist_to_binary(Info).

%% ------------------------------------------------------------ status codes

-define(STATUS_NAMES, [ok, timeout, no_service, queue_full, crashed, malformed, shutting_down,
                       service_error, too_large, invalid_argument, unsupported_version,
                       unauthorized, protocol, unavailable]).

%% The code of a status name (PROTOCOL 2.3), or the code itself.
-spec status_code(status()) -> non_neg_integer().
status_code(Code) when is_integer(Code) -> Code;
status_code(Name) -> index_of(Name, ?STATUS_NAMES, 0).

index_of(Name, [Name | _], I) -> I;
index_of(Name, [_ | T], I) -> index_of(Name, T, I + 1).

%% "NO_SERVICE" for no_service or 2; the number for an unknown code.
-spec status_name(status()) -> binary().
status_name(Status) ->
    case status_atom(Status) of
        A when is_atom(A) -> list_to_binary(string:uppercase(atom_to_list(A)));
        N -> integer_to_binary(N)
    end.

status_atom(Code) when is_integer(Code), Code >= 0, Code < length(?STATUS_NAMES) -> lists:nth(Code + 1, ?STATUS_NAMES);
status_atom(Other) -> Other.

%% ------------------------------------------------------------ state

state(Api) ->
    case get({cumulo, element(2, Api)}) of
        undefined -> throw({cumulo_error, invalid_argument, <<"closed, or an instance of another process">>});
        S -> S
    end.

put_state(Api, S) -> put({cumulo, element(2, Api)}, S), ok.

update(Api, Changes) -> put_state(Api, maps:merge(state(Api), Changes)).

catch_errors(Fun) ->
    try Fun()
    catch throw:{cumulo_error, Status, Message} -> {error, {Status, Message}}
    end.

deadline(Ms, Grace) -> erlang:monotonic_time(millisecond) + Ms + Grace.

to_bin(B) when is_binary(B) -> B;
to_bin(L) -> unicode:characters_to_binary(L).

to_list(L) when is_list(L) -> L;
to_list(B) -> unicode:characters_to_list(B).
