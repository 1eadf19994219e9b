%% A fake core for the session tests: listens on a real Unix socket and runs
%% a script (a fun of the fake core) in its own process.
-module(cumulo_fake_core).
-export([start/1, path/1, join/1]).
-export([accept/1, accept_instance/1, accept_instance/2, expect/2, send/3, send_raw/2, reply/3, reply/4]).

-define(TIMEOUT, 5000).

%% Starts Script(Core) in a new process; join/1 returns what it returned.
start(Script) ->
    Path = filename:join("/tmp", "cumulo-erl-test-" ++ integer_to_list(erlang:unique_integer([positive])) ++
                                 "-" ++ os:getpid() ++ ".sock"),
    _ = file:delete(Path),
    {ok, Listen} = gen_tcp:listen(0, [{ifaddr, {local, Path}}, local, binary, {active, false}, {packet, raw}]),
    Parent = self(),
    Pid = spawn(fun() ->
        Result = try Script(#{listen => Listen}) catch C:R:S -> {fake_core_crashed, C, R, S} end,
        Parent ! {fake_core, self(), Result},
        receive stop -> ok after 10000 -> ok end,
        gen_tcp:close(Listen)
    end),
    ok = gen_tcp:controlling_process(Listen, Pid),
    #{path => Path, pid => Pid}.

path(#{path := Path}) -> Path.

join(#{pid := Pid, path := Path}) ->
    receive {fake_core, Pid, Result} ->
        Pid ! stop,
        _ = file:delete(Path),
        case Result of
            {fake_core_crashed, C, R, S} -> erlang:raise(C, R, S);
            _ -> Result
        end
    after ?TIMEOUT * 2 -> error(fake_core_timeout)
    end.

accept(#{listen := Listen}) ->
    {ok, Sock} = gen_tcp:accept(Listen, ?TIMEOUT),
    #{sock => Sock, buf => <<>>}.

%% Accepts a connection, reads HELLO, answers WELCOME: {Peer, Hello}.
accept_instance(Core) -> accept_instance(Core, #{}).

accept_instance(Core, Welcome) ->
    Peer = accept(Core),
    {Hello, Peer1} = expect(Peer, 'HELLO'),
    Fields = maps:merge(#{version => 1, node_id => 3, instance_id => 9, process_index => 1, process_count => 2,
                          thread_count => 4, window => maps:get(window, Hello), max_frame => 1048576,
                          timeout_async => 700, timeout_sync => 800, timeout_terminate => 900,
                          priority_default => -2, keepalive => 5000, prefix => <<"/t/">>}, Welcome),
    send(Peer1, 'WELCOME', Fields),
    {Peer1, Hello}.

%% Reads the next frame, which must be of Type: {Fields, Peer}.
expect(#{sock := Sock, buf := Buf} = Peer, Type) ->
    case cumulo_codec:split(Buf, 1 bsl 30) of
        {frame, Code, Body, Rest} ->
            {ok, {Got, Fields}} = cumulo_codec:decode_body(Code, Body),
            Type = Got,
            {Fields, Peer#{buf => Rest}};
        more ->
            %% the rest of a frame whose length is known in one piece
            Size = case Buf of
                       <<Length:32/little, _/binary>> -> Length + 4 - byte_size(Buf);
                       _ -> 0
                   end,
            {ok, Data} = gen_tcp:recv(Sock, Size, ?TIMEOUT),
            expect(Peer#{buf => <<Buf/binary, Data/binary>>}, Type)
    end.

send(#{sock := Sock}, Type, Fields) -> ok = gen_tcp:send(Sock, cumulo_codec:encode(Type, Fields)).

send_raw(#{sock := Sock}, Bytes) -> ok = gen_tcp:send(Sock, Bytes).

%% Reads a control request of Type and answers its REPLY.
reply(Peer, Type, Pattern) -> reply(Peer, Type, Pattern, #{}).

reply(Peer, Type, Pattern, Reply) ->
    {#{req_id := ReqId, pattern := Got}, Peer1} = expect(Peer, Type),
    Pattern = Got,
    send(Peer1, 'REPLY', maps:merge(#{req_id => ReqId, status => 0, value => 0, message => <<>>}, Reply)),
    Peer1.
