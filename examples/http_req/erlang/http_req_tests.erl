%% The answers of docs/SDK_GUIDE.md for the http_req example's handler.
-module(http_req_tests).
-include_lib("eunit/include/eunit.hrl").

value(N) -> <<"<http_test><value>", N/binary, "</value></http_test>">>.
-define(NO_VALUE, <<"<http_test><error>no value specified</error></http_test>">>).
-define(INFO, <<"content-type", 0, "text/xml; charset=utf-8", 0>>).

answers_test_() ->
    [?_assertEqual({?INFO, Expected}, http_req:answer(Body)) || {Body, Expected} <- [
        {<<"value", 0, "42", 0>>, value(<<"42">>)},
        {<<"value", 0, "+007", 0>>, value(<<"7">>)},
        {<<"value", 0, "-3", 0>>, value(<<"-3">>)},
        {<<"value", 0, "9223372036854775807", 0>>, value(<<"9223372036854775807">>)},
        {<<"value", 0, "-9223372036854775808", 0>>, value(<<"-9223372036854775808">>)},
        {<<"value", 0, "9223372036854775808", 0>>, ?NO_VALUE},
        {<<"value", 0, "4.2", 0>>, ?NO_VALUE},
        {<<"value", 0, "42\n", 0>>, ?NO_VALUE},
        {<<"value", 0, "", 0>>, ?NO_VALUE},
        {<<"value", 0, " 42", 0>>, ?NO_VALUE},
        {<<"value", 0, "1_000", 0>>, ?NO_VALUE},
        {<<"value", 0, "16#10", 0>>, ?NO_VALUE},
        {<<"value", 0, "-", 0>>, ?NO_VALUE},
        {<<"other", 0, "1", 0>>, ?NO_VALUE},
        {<<"value", 0, "1">>, ?NO_VALUE},
        {<<>>, ?NO_VALUE}]].
