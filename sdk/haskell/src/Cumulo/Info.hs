-- | The key/value encoding of request_info and response_info
-- (PROTOCOL.md section 5): @key\\0value\\0@ pairs, keys may repeat, order kept.
module Cumulo.Info
  ( infoEncode
  , infoParse
  , infoLookup
  ) where

import qualified Data.ByteString as B
import Data.Text (pack)

import Cumulo.Status

-- | Encode pairs; keys and values must not contain NUL.
infoEncode :: [(B.ByteString, B.ByteString)] -> B.ByteString
infoEncode pairs = B.concat (concatMap (\(k, v) -> [k, nul, v, nul]) pairs)
  where nul = B.singleton 0

-- | Parse every pair, or @MALFORMED@ when the buffer does not end with NUL or
-- holds an odd number of fields.
infoParse :: B.ByteString -> Either CumuloError [(B.ByteString, B.ByteString)]
infoParse buf
  | B.null buf = Right []
  | B.last buf /= 0 = malformed "key/value bytes do not end with NUL"
  | odd (length fields) = malformed "key/value bytes hold an odd number of fields"
  | otherwise = Right (pairUp fields)
  where
    fields = init (B.split 0 buf)  -- the final NUL leaves one empty piece
    pairUp (k : v : rest) = (k, v) : pairUp rest
    pairUp _ = []
    malformed = Left . CumuloError statusMalformed . pack

-- | The first value of a key, if the bytes parse and hold it.
infoLookup :: B.ByteString -> B.ByteString -> Maybe B.ByteString
infoLookup key buf = either (const Nothing) (lookup key) (infoParse buf)
