%% Supervises the instances of a service process (cumulo:run/1,2), one
%% process each. They are temporary: an instance that ends is not restarted
%% here (the core restarts the whole process when it must).
-module(cumulo_sup).
-behaviour(supervisor).

-export([start_link/0, start_instance/2, init/1]).
-export([instance/2]).

start_link() -> supervisor:start_link({local, ?MODULE}, ?MODULE, []).

%% Starts one instance: connects with Options, calls Setup(Api), polls
%% until TERMINATE, closes.
start_instance(Options, Setup) -> supervisor:start_child(?MODULE, [Options, Setup]).

init([]) ->
    Instance = #{id => instance, start => {?MODULE, instance, []}, restart => temporary,
                 shutdown => 5000, type => worker, modules => [cumulo]},
    {ok, {#{strategy => simple_one_for_one, intensity => 0, period => 1}, [Instance]}}.

instance(Options, Setup) -> {ok, proc_lib:spawn_link(fun() -> serve(Options, Setup) end)}.

serve(Options, Setup) ->
    case cumulo:new(Options) of
        {ok, Api} ->
            _ = Setup(Api),
            Result = serve_loop(Api),
            cumulo:close(Api),
            case Result of
                ok -> ok;
                {error, Reason} -> exit({shutdown, Reason})
            end;
        {error, Reason} -> exit({shutdown, Reason})
    end.

serve_loop(Api) ->
    case cumulo:poll(Api) of
        true -> serve_loop(Api);
        false -> ok;
        {error, {shutting_down, _}} -> ok;    % the core went away: nothing left to serve
        {error, _} = Error -> Error
    end.
