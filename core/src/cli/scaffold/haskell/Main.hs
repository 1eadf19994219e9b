{-# LANGUAGE OverloadedStrings #-}
-- | {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
-- answers "hello from {{name}}", with the request's "value" parameter when it
-- has one. Runs CUMULO_THREAD_COUNT instances, one per thread.
module Main (main) where

import qualified Data.ByteString.Char8 as BC

import Cumulo

text :: BC.ByteString
text = infoEncode [("content-type", "text/plain; charset=utf-8")]

-- | Malformed key/value bytes are answered as if there were no value.
get :: Handler
get _ request = pure (text, body)
  where
    body = case infoLookup "value" (requestBody request) of
      Just value -> BC.concat ["hello from {{name}} (value ", value, ")"]
      Nothing -> "hello from {{name}}"

main :: IO ()
main = run $ \api -> subscribe api "{{name}}/get" get
