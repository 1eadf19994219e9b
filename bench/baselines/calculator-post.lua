-- wrk script of bench/calculator: POST the operation's JSON body, as the
-- seed's wrk/test_<op>.lua do. The operation comes from the URL path.
wrk.method = "POST"
wrk.body = '{"args": [6, 7]}'
wrk.headers["Content-Type"] = "application/json"
