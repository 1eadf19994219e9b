%% The key/value encoding of request_info and response_info
%% (proto/PROTOCOL.md section 5): key\0value\0key\0value\0...
-module(cumulo_info).

-export([encode/1, parse/1, lookup/2]).

%% Encodes a list of {Key, Value} pairs, or a map (sorted by key). Keys and
%% values are binaries, strings, atoms or integers; a NUL in one is badarg.
-spec encode([{term(), term()}] | map()) -> binary().
encode(Map) when is_map(Map) -> encode(lists:sort(maps:to_list(Map)));
encode(Pairs) when is_list(Pairs) ->
    iolist_to_binary([[text(K), 0, text(V), 0] || {K, V} <- Pairs]).

text(B) when is_binary(B) -> no_nul(B);
text(A) when is_atom(A) -> no_nul(atom_to_binary(A, utf8));
text(I) when is_integer(I) -> integer_to_binary(I);
text(L) when is_list(L) -> no_nul(unicode:characters_to_binary(L)).

no_nul(B) when is_binary(B) ->
    case binary:match(B, <<0>>) of
        nomatch -> B;
        _ -> erlang:error(badarg)
    end.

%% {ok, [{Key, Value}]} in order (keys may repeat), or {error, malformed, Why}.
-spec parse(binary()) -> {ok, [{binary(), binary()}]} | {error, malformed, binary()}.
parse(Bin) when is_binary(Bin) ->
    case binary:split(Bin, <<0>>, [global]) of
        [<<>>] -> {ok, []};
        Parts ->
            case lists:last(Parts) of
                <<>> ->
                    Fields = lists:droplast(Parts),
                    case length(Fields) rem 2 of
                        0 -> {ok, pairs(Fields)};
                        1 -> {error, malformed, <<"a key without its value">>}
                    end;
                _ -> {error, malformed, <<"does not end with NUL">>}
            end
    end.

pairs([K, V | Rest]) -> [{K, V} | pairs(Rest)];
pairs([]) -> [].

%% The value of the first Key, or undefined (also for malformed bytes).
-spec lookup(binary(), binary()) -> binary() | undefined.
lookup(Bin, Key) ->
    case parse(Bin) of
        {ok, Pairs} ->
            case lists:keyfind(Key, 1, Pairs) of
                {_, V} -> V;
                false -> undefined
            end;
        _ -> undefined
    end.
