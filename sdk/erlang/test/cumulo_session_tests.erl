%% The session logic against a fake core over a real Unix socket.
-module(cumulo_session_tests).
-include_lib("eunit/include/eunit.hrl").

-import(cumulo_fake_core, [accept/1, accept_instance/1, accept_instance/2, expect/2, send/3, reply/3, reply/4]).

-define(TID_A, <<16#187a2b1b40fdcd15:64, 3:32, 1:32>>).
-define(TID_B, <<16#187a2b1b40fdcd16:64, 3:32, 1:32>>).

request_fields(TransId, Overrides) ->
    Pattern = maps:get(pattern, Overrides, <<"/t/echo">>),
    maps:merge(#{trans_id => TransId, timeout => 500, priority => 0, flags => 1, source => (3 bsl 32) bor 1,
                 name => Pattern, pattern => Pattern, request_info => <<>>, request => <<"hi">>}, Overrides).

connect(Core) -> connect(Core, #{}).
connect(Core, Options) ->
    {ok, Api} = cumulo:new(maps:merge(#{socket => cumulo_fake_core:path(Core), token => "", prefix => "/t/"}, Options)),
    Api.

handshake_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, Hello} = accept_instance(C),
        {#{trans_id := A}, Peer1} = expect(Peer, 'SEND_ASYNC'),
        {#{trans_id := B}, _} = expect(Peer1, 'SEND_ASYNC'),
        {Hello, A, B}
    end),
    Api = connect(Core, #{thread_index => 2, window => 4}),
    {ok, First} = cumulo:send_async(Api, "/x", <<"1">>),
    {ok, Second} = cumulo:send_async(Api, <<"/x">>, <<"2">>),
    {Hello, A, B} = cumulo_fake_core:join(Core),
    ?assertEqual(#{version => 1, window => 4, thread_index => 2, token => <<>>, prefix => <<"/t/">>}, Hello),
    ?assertEqual({First, Second}, {A, B}),
    ?assertEqual([3, 9, 1, 2, 4, 2, 4], [cumulo:F(Api) || F <- [node_id, instance_id, process_index, process_count,
                                                               thread_count, thread_index, window]]),
    ?assertEqual([700, 800, 900, -2, <<"/t/">>, 1048576, 5000],
                 [cumulo:F(Api) || F <- [timeout_async, timeout_sync, timeout_terminate, priority_default, prefix,
                                         max_frame, keepalive]]),
    <<Time:64, 3:32, 9:32>> = First,
    ?assert(Second > First),
    ?assert(abs(Time div 1000000000 - os:system_time(second)) < 5),
    cumulo:close(Api).

managed_hello_sends_the_token_and_no_prefix_test() ->
    Core = cumulo_fake_core:start(fun(C) -> element(2, accept_instance(C)) end),
    Api = connect(Core, #{token => <<"c0ffee">>, prefix => "/ignored/", thread_index => 1}),
    #{token := <<"c0ffee">>, prefix := <<>>, thread_index := 1} = cumulo_fake_core:join(Core),
    cumulo:close(Api).

error_instead_of_welcome_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        Peer = accept(C),
        {_, Peer1} = expect(Peer, 'HELLO'),
        send(Peer1, 'ERROR', #{status => 11, message => <<"unknown token">>})
    end),
    Result = cumulo:new(#{socket => cumulo_fake_core:path(Core), token => "bad"}),
    cumulo_fake_core:join(Core),
    ?assertEqual({error, {unauthorized, <<"unknown token">>}}, Result).

unmanaged_needs_a_prefix_and_a_socket_test() ->
    ?assertMatch({error, {invalid_argument, _}}, cumulo:new(#{socket => "/nonexistent", token => ""})),
    ?assertMatch({error, {shutting_down, _}}, cumulo:new(#{socket => "/nonexistent/sock", token => "", prefix => "/t/"})),
    ?assertMatch({error, {invalid_argument, _}}, cumulo:new(#{socket => "", token => "", prefix => "/t/"})).

subscriptions_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"a/*">>),
        P2 = reply(P1, 'SUBSCRIBE_COUNT', <<"a/*">>, #{value => 2}),
        reply(P2, 'UNSUBSCRIBE', <<"zz">>, #{status => 9, message => <<"not subscribed">>})
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "a/*", fun(_, _) -> <<"x">> end),
    ?assertEqual({ok, 2}, cumulo:subscribe_count(Api, "a/*")),
    ?assertEqual({error, {invalid_argument, <<"not subscribed">>}}, cumulo:unsubscribe(Api, "zz")),
    cumulo_fake_core:join(Core),
    cumulo:close(Api).

request_is_returned_then_terminate_ends_poll_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"echo">>),
        send(P1, 'REQUEST', request_fields(?TID_A, #{request_info => <<"a", 0, "1", 0>>})),
        {Returned, P2} = expect(P1, 'RETURN'),
        send(P2, 'TERMINATE', #{timeout => 100}),
        {_, _} = expect(P2, 'GOODBYE'),
        Returned
    end),
    Api = connect(Core),
    Self = self(),
    ok = cumulo:subscribe(Api, "echo", fun(_, Req) ->
        Self ! {seen, Req},
        {#{<<"content-type">> => <<"text/plain">>}, [<<"echo: ">>, maps:get(request, Req)]}
    end),
    ?assertEqual(false, cumulo:poll(Api)),
    ?assert(cumulo:is_terminated(Api)),
    cumulo:close(Api),
    ?assertEqual(#{trans_id => ?TID_A, status => 0, response_info => <<"content-type", 0, "text/plain", 0>>,
                   response => <<"echo: hi">>}, cumulo_fake_core:join(Core)),
    receive {seen, Req} ->
        ?assertMatch(#{sync := true, mcast := false, source := 16#300000001, name := <<"/t/echo">>,
                       timeout := 500}, Req),
        ?assertEqual({ok, [{<<"a">>, <<"1">>}]}, cumulo:info_parse(maps:get(request_info, Req)))
    end.

poll_times_out_test() ->
    Core = cumulo_fake_core:start(fun(C) -> accept_instance(C), receive after 500 -> ok end end),
    Api = connect(Core),
    T0 = erlang:monotonic_time(millisecond),
    ?assertEqual(true, cumulo:poll(Api, 50)),
    ?assert(erlang:monotonic_time(millisecond) - T0 >= 50),
    cumulo_fake_core:join(Core),
    cumulo:close(Api).

%% The socket delivers data as messages: a poll that times out mid-frame
%% keeps what came, and the next one completes the frame.
a_frame_cut_across_a_poll_timeout_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"echo">>),
        <<Head:30/binary, Tail/binary>> = cumulo_codec:encode('REQUEST', request_fields(?TID_A, #{})),
        cumulo_fake_core:send_raw(P1, Head),
        timer:sleep(300),
        cumulo_fake_core:send_raw(P1, [Tail, cumulo_codec:encode('TERMINATE', #{timeout => 9})]),
        {Returned, _} = expect(P1, 'RETURN'),
        Returned
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "echo", fun(_, #{request := R}) -> R end),
    ?assertEqual(true, cumulo:poll(Api, 100)),
    ?assertEqual(false, cumulo:poll(Api, 5000)),
    ?assertMatch(#{trans_id := ?TID_A, status := 0, response := <<"hi">>}, cumulo_fake_core:join(Core)),
    cumulo:close(Api).

%% What the socket delivered and no call took is not left in the mailbox.
close_leaves_no_socket_messages_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        timer:sleep(50),    % after the WELCOME was read: a message of its own
        send(Peer, 'PING', #{nonce => 7})
    end),
    Api = connect(Core),
    cumulo_fake_core:join(Core),
    timer:sleep(100),    % the PING, and the close, reach the mailbox
    cumulo:close(Api),
    {messages, Left} = process_info(self(), messages),
    ?assertEqual([], [M || M <- Left, element(1, M) =:= tcp orelse element(1, M) =:= tcp_closed]).

send_sync_answers_ping_and_keeps_other_frames_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"echo">>),
        {#{trans_id := Async}, P2} = expect(P1, 'SEND_ASYNC'),
        {#{trans_id := Sync, name := <<"/s">>, request := <<"q">>}, P3} = expect(P2, 'SEND_SYNC'),
        send(P3, 'PING', #{nonce => 16#fedcba9876543210}),
        {Pong, P4} = expect(P3, 'PONG'),
        send(P4, 'REQUEST', request_fields(?TID_A, #{})),
        send(P4, 'RESPONSE', #{trans_id => Async, status => 0, response_info => <<>>, response => <<"later">>}),
        send(P4, 'RESPONSE', #{trans_id => Sync, status => 0, response_info => <<"k", 0, "v", 0>>, response => <<"now">>}),
        {Returned, P5} = expect(P4, 'RETURN'),
        send(P5, 'TERMINATE', #{timeout => 100}),
        {Pong, Returned}
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "echo", fun(_, #{request := R}) -> R end),
    {ok, Async} = cumulo:send_async(Api, "/a", <<"p">>),
    ?assertEqual({ok, <<"k", 0, "v", 0>>, <<"now">>}, cumulo:send_sync(Api, "/s", <<"q">>)),
    ?assertEqual({ok, Async, <<>>, <<"later">>}, cumulo:recv_async(Api)),
    ?assertEqual(false, cumulo:poll(Api)),
    {Pong, Returned} = cumulo_fake_core:join(Core),
    ?assertEqual(#{nonce => 16#fedcba9876543210}, Pong),
    ?assertMatch(#{trans_id := ?TID_A, status := 0, response := <<"hi">>}, Returned),
    cumulo:close(Api).

error_responses_carry_their_status_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        {#{trans_id := T}, P1} = expect(Peer, 'SEND_SYNC'),
        send(P1, 'RESPONSE', #{trans_id => T, status => 2, response_info => <<>>, response => <<"nobody serves /n">>}),
        {#{trans_id := T2}, P2} = expect(P1, 'SEND_ASYNC'),
        send(P2, 'RESPONSE', #{trans_id => T2, status => 42, response_info => <<>>, response => <<"new code">>})
    end),
    Api = connect(Core),
    ?assertEqual({error, {no_service, <<"nobody serves /n">>}}, cumulo:send_sync(Api, "/n", <<>>)),
    {ok, T2} = cumulo:send_async(Api, "/m", <<>>),
    ?assertEqual({error, {42, <<"new code">>}}, cumulo:recv_async(Api, #{trans_id => T2})),
    ?assertEqual(<<"NO_SERVICE">>, cumulo:status_name(no_service)),
    ?assertEqual(<<"42">>, cumulo:status_name(42)),
    ?assertEqual(<<"UNAVAILABLE">>, cumulo:status_name(13)),
    ?assertEqual(13, cumulo:status_code(unavailable)),
    ?assertEqual(<<"14">>, cumulo:status_name(14)),
    cumulo_fake_core:join(Core),
    cumulo:close(Api).

failing_handler_and_missing_handler_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"boom">>),
        P2 = reply(P1, 'SUBSCRIBE', <<"ok">>),
        send(P2, 'REQUEST', request_fields(?TID_A, #{pattern => <<"/t/boom">>})),
        send(P2, 'REQUEST', request_fields(?TID_B, #{pattern => <<"/t/gone">>})),
        send(P2, 'REQUEST', request_fields(?TID_B, #{pattern => <<"/t/ok">>})),
        {Boom, P3} = expect(P2, 'RETURN'),
        {Gone, P4} = expect(P3, 'RETURN'),
        {Ok, P5} = expect(P4, 'RETURN'),
        send(P5, 'TERMINATE', #{timeout => 100}),
        {Boom, Gone, Ok}
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "boom", fun(_, _) -> error(<<"boom from erlang">>) end),
    ok = cumulo:subscribe(Api, "ok", fun(_, _) -> "ok" end),
    false = cumulo:poll(Api),
    {Boom, Gone, Ok} = cumulo_fake_core:join(Core),
    ?assertMatch(#{status := 7, response := <<"error: boom from erlang", _/binary>>}, Boom),
    ?assertMatch(#{status := 2, response := <<"no handler for /t/gone">>}, Gone),
    ?assertMatch(#{status := 0, response := <<"ok">>}, Ok),
    cumulo:close(Api).

mcast_and_recv_async_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        {#{trans_id := T, name := <<"/m/*">>}, P1} = expect(Peer, 'MCAST_ASYNC'),
        %% a copy's RESPONSE before MCAST_SENT: accepted in either order
        send(P1, 'RESPONSE', #{trans_id => ?TID_B, status => 0, response_info => <<>>, response => <<"b">>}),
        send(P1, 'MCAST_SENT', #{trans_id => T, trans_ids => [?TID_A, ?TID_B]}),
        send(P1, 'RESPONSE', #{trans_id => ?TID_A, status => 0, response_info => <<>>, response => <<"a">>})
    end),
    Api = connect(Core),
    ?assertEqual({ok, [?TID_A, ?TID_B]}, cumulo:mcast_async(Api, "/m/*", <<"x">>)),
    ?assertEqual({ok, ?TID_A, <<>>, <<"a">>}, cumulo:recv_async(Api, #{trans_id => ?TID_A})),
    ?assertEqual({ok, ?TID_B, <<>>, <<"b">>}, cumulo:recv_async(Api)),
    ?assertMatch({error, {timeout, _}}, cumulo:recv_async(Api, #{timeout => 10})),
    cumulo_fake_core:join(Core),
    cumulo:close(Api).

forward_sends_no_return_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"echo">>),
        send(P1, 'REQUEST', request_fields(?TID_A, #{priority => 5})),
        {Forward, P2} = expect(P1, 'FORWARD'),
        send(P2, 'TERMINATE', #{timeout => 100}),
        {_, _} = expect(P2, 'GOODBYE'),    % not a RETURN
        Forward
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "echo", fun(A, Req) -> ok = cumulo:forward(A, Req, "/else", #{request => <<"moved">>}) end),
    false = cumulo:poll(Api),
    cumulo:close(Api),
    ?assertEqual(#{trans_id => ?TID_A, timeout => 500, priority => 5, flags => 0, name => <<"/else">>,
                   request_info => <<>>, request => <<"moved">>}, cumulo_fake_core:join(Core)).

-define(TP, <<"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01">>).
-define(TS, <<"congo=t61rcWkgMzE">>).

%% PROTOCOL.md 5.1: a handler's sends and forward inherit the traceparent
%% and tracestate of the request it handles, after the pairs it gave; a
%% handler-given traceparent is kept; a request without one, a failed
%% handler's context, and a call outside any handler add nothing.
trace_context_of_the_handled_request_test() ->
    Trace = cumulo:info_encode([{traceparent, ?TP}, {tracestate, ?TS}]),
    ParentOnly = cumulo:info_encode([{traceparent, ?TP}]),
    Own = cumulo:info_encode([{traceparent, <<"00-own">>}]),
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"echo">>),
        P2 = reply(P1, 'SUBSCRIBE', <<"boom">>),
        send(P2, 'REQUEST', request_fields(?TID_A, #{request_info => <<"a", 0, "1", 0, Trace/binary>>})),
        {#{trans_id := S, request_info := SyncInfo}, P3} = expect(P2, 'SEND_SYNC'),
        send(P3, 'RESPONSE', #{trans_id => S, status => 0, response_info => <<>>, response => <<>>}),
        {#{request_info := AsyncInfo}, P4} = expect(P3, 'SEND_ASYNC'),
        {#{trans_id := M, request_info := McastInfo}, P5} = expect(P4, 'MCAST_ASYNC'),
        send(P5, 'MCAST_SENT', #{trans_id => M, trans_ids => []}),
        {#{request_info := OwnInfo}, P6} = expect(P5, 'SEND_ASYNC'),
        {#{request_info := ForwardInfo}, P7} = expect(P6, 'FORWARD'),
        %% a traceparent without tracestate; a handler that fails: its context goes with it
        send(P7, 'REQUEST', request_fields(?TID_B, #{pattern => <<"/t/boom">>, request_info => ParentOnly})),
        {#{request_info := BoomInfo}, P8} = expect(P7, 'SEND_ASYNC'),
        {#{status := 7}, P9} = expect(P8, 'RETURN'),
        %% a request without traceparent
        send(P9, 'REQUEST', request_fields(?TID_A, #{request_info => <<"tracestate", 0, "x=1", 0>>})),
        {#{request_info := PlainInfo}, P10} = expect(P9, 'SEND_ASYNC'),
        {_, P11} = expect(P10, 'RETURN'),
        send(P11, 'TERMINATE', #{timeout => 100}),
        {#{request_info := OutsideInfo}, _} = expect(P11, 'SEND_ASYNC'),
        [SyncInfo, AsyncInfo, McastInfo, OwnInfo, ForwardInfo, BoomInfo, PlainInfo, OutsideInfo]
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "echo", fun(A, #{request_info := Info} = Req) ->
        case cumulo_info:lookup(Info, <<"traceparent">>) of
            undefined ->
                {ok, _} = cumulo:send_async(A, "/plain", <<>>, #{request_info => Info});
            _ ->
                {ok, _, _} = cumulo:send_sync(A, "/s", <<>>),
                {ok, _} = cumulo:send_async(A, "/a", <<>>, #{request_info => [{k, v}]}),
                {ok, []} = cumulo:mcast_async(A, "/m", <<>>, #{request_info => #{}}),
                {ok, _} = cumulo:send_async(A, "/own", <<>>, #{request_info => Own}),
                ok = cumulo:forward(A, Req, "/f", #{request_info => <<>>})
        end,
        <<>>
    end),
    ok = cumulo:subscribe(Api, "boom", fun(A, _) ->
        {ok, _} = cumulo:send_async(A, "/b", <<>>),
        error(boom)
    end),
    ?assertEqual(false, cumulo:poll(Api)),
    {ok, _} = cumulo:send_async(Api, "/outside", <<>>),
    ?assertEqual([Trace, <<"k", 0, "v", 0, Trace/binary>>, Trace, Own, Trace, ParentOnly,
                  <<"tracestate", 0, "x=1", 0>>, <<>>], cumulo_fake_core:join(Core)),
    cumulo:close(Api).

frames_over_the_limit_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C, #{max_frame => 100}),
        P1 = reply(Peer, 'SUBSCRIBE', <<"big">>),
        {#{name := <<"/small">>}, P2} = expect(P1, 'SEND_ASYNC'),    % the big one was never written
        send(P2, 'REQUEST', request_fields(?TID_A, #{pattern => <<"/t/big">>})),
        {Returned, P3} = expect(P2, 'RETURN'),
        %% a frame over the read limit (max_frame + what a REQUEST adds)
        cumulo_fake_core:send_raw(P3, <<(100 + 8 + 2 + 65535 + 1):32/little, 16#82>>),
        Returned
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "big", fun(_, _) -> binary:copy(<<"x">>, 200) end),
    ?assertMatch({error, {too_large, _}}, cumulo:send_async(Api, "/big", binary:copy(<<"x">>, 200))),
    {ok, _} = cumulo:send_async(Api, "/small", <<>>),
    ?assertMatch({error, {too_large, _}}, cumulo:poll(Api, 5000)),
    ?assertMatch(#{status := 8, response := <<"the answer of", _/binary>>}, cumulo_fake_core:join(Core)),
    cumulo:close(Api).

send_sync_gives_up_after_timeout_and_grace_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C),
        {#{trans_id := T, timeout := 20}, P1} = expect(Peer, 'SEND_SYNC'),
        {#{trans_id := T2}, P2} = expect(P1, 'SEND_ASYNC'),
        %% the late answer is dropped, the next one is kept
        send(P2, 'RESPONSE', #{trans_id => T, status => 0, response_info => <<>>, response => <<"late">>}),
        send(P2, 'RESPONSE', #{trans_id => T2, status => 0, response_info => <<>>, response => <<"kept">>})
    end),
    Api = connect(Core),
    ?assertMatch({error, {timeout, _}}, cumulo:send_sync(Api, "/slow", <<>>, #{timeout => 20})),
    {ok, T2} = cumulo:send_async(Api, "/b", <<>>),
    ?assertEqual({ok, T2, <<>>, <<"kept">>}, cumulo:recv_async(Api)),
    cumulo_fake_core:join(Core),
    cumulo:close(Api).

window_of_requests_answered_in_order_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, #{window := 3}} = accept_instance(C),
        P1 = reply(Peer, 'SUBSCRIBE', <<"echo">>),
        Frames = [cumulo_codec:encode('REQUEST', request_fields(<<N:64, 3:32, 1:32>>, #{request => <<N>>}))
                  || N <- [1, 2, 3]],
        cumulo_fake_core:send_raw(P1, iolist_to_binary([Frames, cumulo_codec:encode('TERMINATE', #{timeout => 9})])),
        {R1, P2} = expect(P1, 'RETURN'),
        {R2, P3} = expect(P2, 'RETURN'),
        {R3, _} = expect(P3, 'RETURN'),
        [maps:get(response, R) || R <- [R1, R2, R3]]
    end),
    Api = connect(Core, #{window => 3}),
    ok = cumulo:subscribe(Api, "echo", fun(_, #{request := R}) -> R end),
    false = cumulo:poll(Api),
    ?assertEqual([<<1>>, <<2>>, <<3>>], cumulo_fake_core:join(Core)),
    cumulo:close(Api).

the_stream_cut_every_way_test_() -> {timeout, 60, fun the_stream_cut_every_way/0}.

the_stream_cut_every_way() ->
    Big = binary:copy(<<"0123456789abcdef">>, 3 * 65536),    % 3 MiB: many reads
    Core = cumulo_fake_core:start(fun(C) ->
        {Peer, _} = accept_instance(C, #{max_frame => 4 * 1024 * 1024}),
        P1 = reply(Peer, 'SUBSCRIBE', <<"echo">>),
        Frame = cumulo_codec:encode('REQUEST', request_fields(?TID_A, #{request => Big})),
        %% a frame cut inside its length field, then inside its body
        <<Head:2/binary, Middle:1000/binary, Tail/binary>> = Frame,
        [begin cumulo_fake_core:send_raw(P1, Part), timer:sleep(20) end || Part <- [Head, Middle, Tail]],
        %% then two frames and the start of a third in one write, the rest later
        Small = [cumulo_codec:encode('REQUEST', request_fields(<<N:64, 3:32, 1:32>>, #{request => <<N>>})) || N <- [1, 2, 3]],
        <<Third1:10/binary, Third2/binary>> = lists:nth(3, Small),
        cumulo_fake_core:send_raw(P1, iolist_to_binary([lists:sublist(Small, 2), Third1])),
        timer:sleep(20),
        cumulo_fake_core:send_raw(P1, [Third2, cumulo_codec:encode('TERMINATE', #{timeout => 9})]),
        {R0, P2} = expect(P1, 'RETURN'),
        {R1, P3} = expect(P2, 'RETURN'),
        {R2, P4} = expect(P3, 'RETURN'),
        {R3, _} = expect(P4, 'RETURN'),
        [maps:get(response, R) || R <- [R0, R1, R2, R3]]
    end),
    Api = connect(Core),
    ok = cumulo:subscribe(Api, "echo", fun(_, #{request := R}) -> R end),
    false = cumulo:poll(Api),
    [Echoed | Rest] = cumulo_fake_core:join(Core),
    ?assert(Echoed =:= Big),
    ?assertEqual([<<1>>, <<2>>, <<3>>], Rest),
    cumulo:close(Api).

run_starts_an_instance_per_thread_test() ->
    Core = cumulo_fake_core:start(fun(C) ->
        Peers = [accept_instance(C) || _ <- [1, 2]],
        Indexes = lists:sort([maps:get(thread_index, Hello) || {_, Hello} <- Peers]),
        Ps = [reply(P, 'SUBSCRIBE', <<"echo">>) || {P, _} <- Peers],
        _ = [send(P, 'TERMINATE', #{timeout => 100}) || P <- Ps],
        _ = [element(1, expect(P, 'GOODBYE')) || P <- Ps],
        Indexes
    end),
    ?assertEqual(ok, cumulo:run(fun(Api) -> ok = cumulo:subscribe(Api, "echo", fun(_, _) -> <<>> end) end,
                                #{thread_count => 2, socket => cumulo_fake_core:path(Core), prefix => "/t/"})),
    ?assertEqual([0, 1], cumulo_fake_core:join(Core)).

info_test() ->
    ?assertEqual(<<"a", 0, "1", 0, "b", 0, "x", 0>>, cumulo:info_encode([{a, 1}, {"b", <<"x">>}])),
    ?assertEqual(<<"a", 0, "1", 0, "b", 0, "2", 0>>, cumulo:info_encode(#{<<"b">> => 2, <<"a">> => 1})),
    ?assertError(badarg, cumulo:info_encode([{<<"a", 0>>, <<>>}])),
    ?assertEqual(<<"v">>, cumulo_info:lookup(<<"k", 0, "v", 0>>, <<"k">>)),
    ?assertEqual(undefined, cumulo_info:lookup(<<"k", 0>>, <<"k">>)).
