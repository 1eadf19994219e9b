(* Strict UTF-8 validation (OCaml 4.13's stdlib has none): no overlong
   forms, no surrogates, nothing above U+10FFFF. *)

let valid s =
  let n = String.length s in
  let byte i = if i < n then Char.code (String.unsafe_get s i) else 0 in
  let cont i = byte i land 0xc0 = 0x80 in
  let rec go i =
    if i >= n then true
    else
      let c = byte i in
      if c < 0x80 then go (i + 1)
      else if c >= 0xc2 && c <= 0xdf then cont (i + 1) && go (i + 2)
      else if c = 0xe0 then byte (i + 1) >= 0xa0 && byte (i + 1) <= 0xbf && cont (i + 2) && go (i + 3)
      else if (c >= 0xe1 && c <= 0xec) || c = 0xee || c = 0xef then cont (i + 1) && cont (i + 2) && go (i + 3)
      else if c = 0xed then byte (i + 1) >= 0x80 && byte (i + 1) <= 0x9f && cont (i + 2) && go (i + 3)
      else if c = 0xf0 then byte (i + 1) >= 0x90 && byte (i + 1) <= 0xbf && cont (i + 2) && cont (i + 3) && go (i + 4)
      else if c >= 0xf1 && c <= 0xf3 then cont (i + 1) && cont (i + 2) && cont (i + 3) && go (i + 4)
      else if c = 0xf4 then byte (i + 1) >= 0x80 && byte (i + 1) <= 0x8f && cont (i + 2) && cont (i + 3) && go (i + 4)
      else false
  in
  go 0
