%% The cumulo application: its supervisor holds the instances of cumulo:run/1,2.
-module(cumulo_app).
-behaviour(application).

-export([start/2, stop/1]).

start(_Type, _Args) -> cumulo_sup:start_link().

stop(_State) -> ok.
