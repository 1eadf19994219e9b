%% A small JSON reader for the shared vectors (OTP 25 has no json module):
%% objects become maps with binary keys, integers stay exact.
-module(cumulo_test_json).
-export([decode/1]).

decode(Bin) ->
    {Value, Rest} = value(ws(Bin)),
    <<>> = ws(Rest),
    Value.

ws(<<C, R/binary>>) when C =:= $\s; C =:= $\n; C =:= $\r; C =:= $\t -> ws(R);
ws(B) -> B.

value(<<${, R/binary>>) -> object(ws(R), #{});
value(<<$[, R/binary>>) -> array(ws(R), []);
value(<<$", R/binary>>) -> string(R, []);
value(<<"true", R/binary>>) -> {true, R};
value(<<"false", R/binary>>) -> {false, R};
value(<<"null", R/binary>>) -> {null, R};
value(B) -> number(B, []).

object(<<$}, R/binary>>, Acc) -> {Acc, R};
object(<<$", R/binary>>, Acc) ->
    {Key, R1} = string(R, []),
    <<$:, R2/binary>> = ws(R1),
    {Value, R3} = value(ws(R2)),
    case ws(R3) of
        <<$,, R4/binary>> -> object(ws(R4), Acc#{Key => Value});
        <<$}, R4/binary>> -> {Acc#{Key => Value}, R4}
    end.

array(<<$], R/binary>>, Acc) -> {lists:reverse(Acc), R};
array(B, Acc) ->
    {Value, R} = value(B),
    case ws(R) of
        <<$,, R1/binary>> -> array(ws(R1), [Value | Acc]);
        <<$], R1/binary>> -> {lists:reverse([Value | Acc]), R1}
    end.

string(<<$", R/binary>>, Acc) -> {unicode:characters_to_binary(lists:reverse(Acc)), R};
string(<<$\\, $u, H:4/binary, R/binary>>, Acc) -> string(R, [binary_to_integer(H, 16) | Acc]);
string(<<$\\, C, R/binary>>, Acc) ->
    Char = case C of $n -> $\n; $t -> $\t; $r -> $\r; $b -> $\b; $f -> $\f; _ -> C end,
    string(R, [Char | Acc]);
string(<<C/utf8, R/binary>>, Acc) -> string(R, [C | Acc]).

number(<<C, R/binary>>, Acc) when C =:= $-; C >= $0, C =< $9 -> number(R, [C | Acc]);
number(R, Acc) -> {list_to_integer(lists:reverse(Acc)), R}.
