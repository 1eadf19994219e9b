%% Frames of the cumulo wire protocol v1 (proto/PROTOCOL.md section 4):
%% encode a message to the bytes of one frame, decode one frame's bytes.
%% A message is {Type, Fields}: Type an atom ('SEND_SYNC', 'REQUEST', ...),
%% Fields a map keyed by the field names of PROTOCOL.md.
-module(cumulo_codec).

-export([encode/1, encode/2, decode/1, decode/2, decode_body/2, split/2]).
-export([type_code/1, type_name/1]).

-define(VERSION, 1).

%% The largest frame the codec reads unless told otherwise: the core's
%% default max_frame (8 MiB) plus what a REQUEST adds (PROTOCOL 2).
-define(DEFAULT_LIMIT, (8 * 1024 * 1024 + 65545)).

type_code('HELLO') -> 16#01;
type_code('SUBSCRIBE') -> 16#02;
type_code('UNSUBSCRIBE') -> 16#03;
type_code('SUBSCRIBE_COUNT') -> 16#04;
type_code('SEND_ASYNC') -> 16#10;
type_code('SEND_SYNC') -> 16#11;
type_code('MCAST_ASYNC') -> 16#12;
type_code('RETURN') -> 16#20;
type_code('FORWARD') -> 16#21;
type_code('PING') -> 16#30;
type_code('PONG') -> 16#31;
type_code('GOODBYE') -> 16#32;
type_code('WELCOME') -> 16#81;
type_code('REQUEST') -> 16#82;
type_code('RESPONSE') -> 16#83;
type_code('REPLY') -> 16#84;
type_code('MCAST_SENT') -> 16#85;
type_code('TERMINATE') -> 16#86;
type_code('ERROR') -> 16#87.

type_name(16#01) -> 'HELLO';
type_name(16#02) -> 'SUBSCRIBE';
type_name(16#03) -> 'UNSUBSCRIBE';
type_name(16#04) -> 'SUBSCRIBE_COUNT';
type_name(16#10) -> 'SEND_ASYNC';
type_name(16#11) -> 'SEND_SYNC';
type_name(16#12) -> 'MCAST_ASYNC';
type_name(16#20) -> 'RETURN';
type_name(16#21) -> 'FORWARD';
type_name(16#30) -> 'PING';
type_name(16#31) -> 'PONG';
type_name(16#32) -> 'GOODBYE';
type_name(16#81) -> 'WELCOME';
type_name(16#82) -> 'REQUEST';
type_name(16#83) -> 'RESPONSE';
type_name(16#84) -> 'REPLY';
type_name(16#85) -> 'MCAST_SENT';
type_name(16#86) -> 'TERMINATE';
type_name(16#87) -> 'ERROR';
type_name(_) -> unknown.

%% The field layout of each frame type, in wire order.
layout('HELLO') -> [{version, u16}, {window, u32}, {thread_index, u32}, {token, str}, {prefix, str}];
layout(T) when T =:= 'SUBSCRIBE'; T =:= 'UNSUBSCRIBE'; T =:= 'SUBSCRIBE_COUNT' ->
    [{req_id, u32}, {pattern, str}];
layout(T) when T =:= 'SEND_ASYNC'; T =:= 'SEND_SYNC'; T =:= 'MCAST_ASYNC'; T =:= 'FORWARD' ->
    [{trans_id, tid}, {timeout, u32}, {priority, i8}, {flags, u8}, {name, str},
     {request_info, bytes}, {request, bytes}];
layout(T) when T =:= 'RETURN'; T =:= 'RESPONSE' ->
    [{trans_id, tid}, {status, u16}, {response_info, bytes}, {response, bytes}];
layout(T) when T =:= 'PING'; T =:= 'PONG' -> [{nonce, u64}];
layout('GOODBYE') -> [];
layout('WELCOME') ->
    [{version, u16}, {node_id, u32}, {instance_id, u32}, {process_index, u32}, {process_count, u32},
     {thread_count, u32}, {window, u32}, {max_frame, u32}, {timeout_async, u32}, {timeout_sync, u32},
     {timeout_terminate, u32}, {priority_default, i8}, {keepalive, u32}, {prefix, str}];
layout('REQUEST') ->
    [{trans_id, tid}, {timeout, u32}, {priority, i8}, {flags, u8}, {source, u64}, {name, str},
     {pattern, str}, {request_info, bytes}, {request, bytes}];
layout('REPLY') -> [{req_id, u32}, {status, u16}, {value, u32}, {message, str}];
layout('MCAST_SENT') -> [{trans_id, tid}, {trans_ids, tids}];
layout('TERMINATE') -> [{timeout, u32}];
layout('ERROR') -> [{status, u16}, {message, str}].

%% --------------------------------------------------------------- encoding

%% The whole frame (length prefix included) as a binary; crashes with
%% badarg on a field out of range.
-spec encode({atom(), map()}) -> binary().
encode({Type, Fields}) -> encode(Type, Fields).

-spec encode(atom(), map()) -> binary().
encode('RETURN', #{trans_id := <<_:16/binary>> = T, status := S, response_info := I, response := R}) ->
    %% the hot path of a service: written out rather than table-driven
    Length = 1 + 16 + 2 + 4 + byte_size(I) + 4 + byte_size(R),
    <<Length:32/little, 16#20, T/binary, S:16/little, (byte_size(I)):32/little, I/binary,
      (byte_size(R)):32/little, R/binary>>;
encode(Type, Fields) ->
    Body = [encode_field(Kind, maps:get(Name, Fields)) || {Name, Kind} <- layout(Type)],
    Bin = iolist_to_binary([type_code(Type) | Body]),
    <<(byte_size(Bin)):32/little, Bin/binary>>.

encode_field(u8, V) when V >= 0, V =< 16#ff -> <<V:8>>;
encode_field(i8, V) when V >= -128, V =< 127 -> <<V:8/signed>>;
encode_field(u16, V) when V >= 0, V =< 16#ffff -> <<V:16/little>>;
encode_field(u32, V) when V >= 0, V =< 16#ffffffff -> <<V:32/little>>;
encode_field(u64, V) when V >= 0, V =< 16#ffffffffffffffff -> <<V:64/little>>;
encode_field(tid, <<_:16/binary>> = V) -> V;
encode_field(str, V) ->
    B = unicode:characters_to_binary(V),
    true = is_binary(B) andalso byte_size(B) =< 16#ffff orelse erlang:error(badarg),
    <<(byte_size(B)):16/little, B/binary>>;
encode_field(bytes, V) ->
    B = iolist_to_binary(V),
    <<(byte_size(B)):32/little, B/binary>>;
encode_field(tids, V) ->
    [<<(length(V)):32/little>> | [encode_field(tid, T) || T <- V]];
encode_field(_, _) -> erlang:error(badarg).

%% --------------------------------------------------------------- decoding

%% Decodes one whole frame (length prefix included): {ok, {Type, Fields}},
%% or {error, Status, Message} with Status malformed or too_large
%% (a length over Limit, checked before the body is looked at).
-spec decode(binary()) -> {ok, {atom(), map()}} | {error, atom(), binary()}.
decode(Frame) -> decode(Frame, ?DEFAULT_LIMIT).

decode(<<Length:32/little, Rest/binary>>, Limit) when Length > Limit ->
    _ = Rest,
    {error, too_large, iolist_to_binary(io_lib:format("frame of ~b bytes over the limit of ~b", [Length, Limit]))};
decode(<<0:32, _/binary>>, _) -> {error, malformed, <<"frame length 0">>};
decode(<<Length:32/little, Code, Body/binary>>, _) when byte_size(Body) =:= Length - 1 ->
    decode_body(Code, Body);
decode(<<_:32/little, _/binary>>, _) -> {error, malformed, <<"frame length does not match its bytes">>};
decode(_, _) -> {error, malformed, <<"truncated length field">>}.

%% Splits the first whole frame off a stream buffer: {frame, Code, Body, Rest},
%% more (not all there yet) or {error, too_large | malformed, Message}.
-spec split(binary(), non_neg_integer()) ->
    {frame, byte(), binary(), binary()} | more | {error, atom(), binary()}.
split(<<Length:32/little, _/binary>>, Limit) when Length > Limit ->
    {error, too_large, iolist_to_binary(io_lib:format("frame of ~b bytes over the limit of ~b", [Length, Limit]))};
split(<<0:32, _/binary>>, _) -> {error, malformed, <<"frame length 0">>};
split(<<Length:32/little, Code, Rest/binary>>, _) when byte_size(Rest) >= Length - 1 ->
    BodyLength = Length - 1,
    <<Body:BodyLength/binary, After/binary>> = Rest,
    {frame, Code, Body, After};
split(_, _) -> more.

%% Decodes the body of a frame of type Code (an integer or a type name).
-spec decode_body(byte() | atom(), binary()) -> {ok, {atom(), map()}} | {error, atom(), binary()}.
decode_body(16#82, <<T:16/binary, Timeout:32/little, Priority:8/signed, Flags, Source:64/little,
                     NL:16/little, Name:NL/binary, PL:16/little, Pattern:PL/binary,
                     IL:32/little, Info:IL/binary, RL:32/little, Request:RL/binary>>) ->
    %% the hot path of a service: one match
    case valid_utf8(Name) andalso valid_utf8(Pattern) of
        true ->
            {ok, {'REQUEST', #{trans_id => T, timeout => Timeout, priority => Priority, flags => Flags,
                               source => Source, name => Name, pattern => Pattern,
                               request_info => Info, request => Request}}};
        false -> {error, malformed, <<"REQUEST: invalid UTF-8 in a str field">>}
    end;
decode_body(Code, Body) when is_integer(Code) ->
    case type_name(Code) of
        unknown -> {error, malformed, iolist_to_binary(io_lib:format("unknown frame type 0x~2.16.0b", [Code]))};
        Type -> decode_body(Type, Body)
    end;
decode_body(Type, Body) ->
    try decode_fields(layout(Type), Body, #{}) of
        {Fields, <<>>} -> {ok, {Type, Fields}};
        {_, Trailing} ->
            {error, malformed, iolist_to_binary(io_lib:format("~s: ~b trailing bytes", [Type, byte_size(Trailing)]))}
    catch
        throw:{malformed, Field} ->
            {error, malformed, iolist_to_binary(io_lib:format("~s: field ~s is truncated or invalid", [Type, Field]))}
    end.

decode_fields([], Rest, Acc) -> {Acc, Rest};
decode_fields([{Name, Kind} | Layout], Bin, Acc) ->
    {Value, Rest} = decode_field(Kind, Bin, Name),
    decode_fields(Layout, Rest, Acc#{Name => Value}).

decode_field(u8, <<V, R/binary>>, _) -> {V, R};
decode_field(i8, <<V:8/signed, R/binary>>, _) -> {V, R};
decode_field(u16, <<V:16/little, R/binary>>, _) -> {V, R};
decode_field(u32, <<V:32/little, R/binary>>, _) -> {V, R};
decode_field(u64, <<V:64/little, R/binary>>, _) -> {V, R};
decode_field(tid, <<V:16/binary, R/binary>>, _) -> {V, R};
decode_field(str, <<N:16/little, V:N/binary, R/binary>>, Name) ->
    valid_utf8(V) orelse throw({malformed, Name}),
    {V, R};
decode_field(bytes, <<N:32/little, V:N/binary, R/binary>>, _) -> {V, R};
decode_field(tids, <<N:32/little, R/binary>>, _) when byte_size(R) >= 16 * N ->
    Size = 16 * N,
    <<Tids:Size/binary, Rest/binary>> = R,
    {[T || <<T:16/binary>> <= Tids], Rest};
decode_field(_, _, Name) -> throw({malformed, Name}).

valid_utf8(B) -> is_binary(unicode:characters_to_binary(B, utf8, utf8)).
