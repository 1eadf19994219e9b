(* The answers of docs/SDK_GUIDE.md for the http_req example. *)

let value n = "<http_test><value>" ^ n ^ "</value></http_test>"
let no_value = "<http_test><error>no value specified</error></http_test>"

let cases =
  [ ("value\00042\000", value "42"); ("value\000+007\000", value "7"); ("value\000-3\000", value "-3");
    ("value\0009223372036854775807\000", value "9223372036854775807");
    ("value\000-9223372036854775808\000", value "-9223372036854775808");
    ("value\0009223372036854775808\000", no_value); ("value\0004.2\000", no_value); ("value\0000x10\000", no_value);
    ("value\0001_000\000", no_value); ("value\00042\n\000", no_value); ("value\000\000", no_value); ("value\000-\000", no_value);
    ("other\0001\000", no_value); ("value\0001", no_value); ("", no_value) ]

let () =
  Alcotest.run "http_req"
    [ ( "answers",
        List.mapi
          (fun i (body, expected) ->
            Alcotest.test_case (Printf.sprintf "%d %S" i body) `Quick (fun () ->
                let info, response = Answer.answer body in
                Alcotest.(check string) "info" "content-type\000text/xml; charset=utf-8\000" info;
                Alcotest.(check string) "response" expected response))
          cases ) ]
