%% Every shared vector of proto/vectors/*.json: decoded and compared field
%% by field, encoded and compared byte for byte; every invalid one refused.
-module(cumulo_vectors_tests).
-include_lib("eunit/include/eunit.hrl").

vectors_dir() ->
    Here = filename:dirname(code:which(?MODULE)),
    %% rebar3 runs the tests from _build/test/lib/cumulo/test; erlc from test/
    hd([D || D <- [os:getenv("CUMULO_VECTORS", ""),
                   filename:join([Here, "..", "..", "..", "..", "..", "..", "..", "proto", "vectors"]),
                   filename:join([Here, "..", "..", "..", "proto", "vectors"]),
                   "../../proto/vectors"],
             D =/= "", filelib:is_dir(D)]).

files() ->
    Files = filelib:wildcard(filename:join(vectors_dir(), "*.json")),
    [{filename:basename(F), cumulo_test_json:decode(element(2, file:read_file(F)))} || F <- Files].

%% One test per vector, named after it.
vectors_test_() ->
    Files = files(),
    ?assert(length(Files) >= 6),
    lists:append([frame_tests(Name, Doc) || {Name, Doc} <- Files, Name =/= "kv.json"]) ++
        kv_tests(proplists:get_value("kv.json", Files)).

frame_tests(File, Doc) ->
    Valid = [{binary_to_list(maps:get(<<"name">>, V)),
              fun() -> check_frame(V) end} || V <- maps:get(<<"vectors">>, Doc)],
    Invalid = [{binary_to_list(maps:get(<<"name">>, V)),
                fun() -> check_invalid(V) end} || V <- maps:get(<<"invalid">>, Doc, [])],
    [{File ++ ": " ++ N, T} || {N, T} <- Valid ++ Invalid].

check_frame(#{<<"type">> := TypeName, <<"hex">> := Hex, <<"fields">> := Json}) ->
    Type = binary_to_atom(TypeName),
    Frame = binary:decode_hex(Hex),
    {ok, {Type, Fields}} = cumulo_codec:decode(Frame),
    Expected = expected_fields(Type, Json),
    ?assertEqual(Expected, Fields),
    ?assertEqual(Frame, cumulo_codec:encode(Type, Expected)).

%% The JSON fields as the codec's: hex for bytes and trans_ids, text as UTF-8.
expected_fields(Type, Json) ->
    maps:from_list([{binary_to_atom(K), json_value(Type, binary_to_atom(K), V)} || {K, V} <- maps:to_list(Json)]).

json_value(_, trans_ids, V) -> [binary:decode_hex(T) || T <- V];
json_value(_, K, V) when K =:= trans_id; K =:= request_info; K =:= request;
                          K =:= response_info; K =:= response -> binary:decode_hex(V);
json_value(_, _, V) -> V.

check_invalid(#{<<"hex">> := Hex, <<"error">> := Error}) ->
    Status = list_to_atom(string:lowercase(binary_to_list(Error))),
    ?assertMatch({error, Status, _}, cumulo_codec:decode(binary:decode_hex(Hex), 1024)).

kv_tests(Doc) ->
    [{"kv.json: " ++ binary_to_list(maps:get(<<"name">>, V)),
      fun() ->
          Bin = binary:decode_hex(maps:get(<<"hex">>, V)),
          Pairs = [{K, Val} || [K, Val] <- maps:get(<<"pairs">>, V)],
          ?assertEqual({ok, Pairs}, cumulo:info_parse(Bin)),
          ?assertEqual(Bin, cumulo:info_encode(Pairs))
      end} || V <- maps:get(<<"vectors">>, Doc)] ++
    [{"kv.json: " ++ binary_to_list(maps:get(<<"name">>, V)),
      fun() -> ?assertMatch({error, {malformed, _}}, cumulo:info_parse(binary:decode_hex(maps:get(<<"hex">>, V)))) end}
     || V <- maps:get(<<"invalid">>, Doc)].
