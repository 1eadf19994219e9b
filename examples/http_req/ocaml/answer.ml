(* The answer of the http_req example (docs/SDK_GUIDE.md) to a request body. *)

let response_info = Cumulo.info_encode [ ("content-type", "text/xml; charset=utf-8") ]
let no_value = "<http_test><error>no value specified</error></http_test>"

(* The decimal form of an optionally signed ASCII integer that fits in 64
   bits (signed), else None. *)
let int64_text text =
  let n = String.length text in
  let digits_from = if n > 0 && (text.[0] = '+' || text.[0] = '-') then 1 else 0 in
  let all_digits = ref (n > digits_from) in
  String.iteri (fun i c -> if i >= digits_from && (c < '0' || c > '9') then all_digits := false) text;
  if not !all_digits then None
  else
    (* Int64.of_string takes "-9223372036854775808" but also "0x..", "_": the check above rules those out *)
    let unsigned = String.sub text digits_from (n - digits_from) in
    let signed = if text.[0] = '-' then "-" ^ unsigned else unsigned in
    match Int64.of_string_opt signed with Some v -> Some (Int64.to_string v) | None -> None

let answer body =
  match Option.bind (Cumulo.Info.lookup body "value") int64_text with
  | Some number -> (response_info, "<http_test><value>" ^ number ^ "</value></http_test>")
  | None -> (response_info, no_value)

