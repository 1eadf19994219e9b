{-# LANGUAGE OverloadedStrings #-}
-- | The http_req example service (docs/SDK_GUIDE.md): subscribes
-- haskell.xml/get and answers <http_test><value>N</value></http_test> for an
-- integer "value" in the key/value request body, or an error element
-- otherwise. Runs CUMULO_THREAD_COUNT instances, one per thread.
-- HTTP_REQ_WINDOW: requests the core may deliver to each instance at once
-- (default 1; anything but a positive integer stops the process).
module Main (main) where

import qualified Data.ByteString as B
import qualified Data.ByteString.Char8 as BC
import Data.Char (isDigit)
import Data.Int (Int64)
import Data.Word (Word32)
import System.Environment (lookupEnv)
import System.Exit (die)
import Text.Read (readMaybe)

import Cumulo

contentType :: B.ByteString
contentType = infoEncode [("content-type", "text/xml; charset=utf-8")]

-- | An optional sign, then one or more ASCII digits, within Int64.
parseInt64 :: B.ByteString -> Maybe Int64
parseInt64 text = do
  (negative, digits) <- case BC.uncons text of
    Just ('-', rest) -> Just (True, rest)
    Just ('+', rest) -> Just (False, rest)
    _ -> Just (False, text)
  if B.null digits || not (BC.all (\c -> c >= '0' && c <= '9') digits) then Nothing else do
    let magnitude = BC.foldl' (\acc c -> acc * 10 + toInteger (fromEnum c - fromEnum '0')) 0 digits :: Integer
        n = if negative then negate magnitude else magnitude
    if n < toInteger (minBound :: Int64) || n > toInteger (maxBound :: Int64) then Nothing else Just (fromInteger n)

httpReq :: Handler
httpReq _ request = pure (contentType, body)
  where
    body = case infoLookup "value" (requestBody request) >>= parseInt64 of
      Just n -> BC.concat ["<http_test><value>", BC.pack (show n), "</value></http_test>"]
      Nothing -> "<http_test><error>no value specified</error></http_test>"

main :: IO ()
main = do
  window <- either die pure . windowFrom =<< lookupEnv "HTTP_REQ_WINDOW"
  runWith defaultConfig {configWindow = window} $ \api ->
    subscribe api "haskell.xml/get" httpReq

-- | HTTP_REQ_WINDOW's value: unset or empty is 1; anything but a positive
-- integer (ASCII digits, at most 2^32-1) is an error that stops the process.
windowFrom :: Maybe String -> Either String Word32
windowFrom Nothing = Right 1
windowFrom (Just "") = Right 1
windowFrom (Just w)
  | all isDigit w, Just n <- (readMaybe w :: Maybe Integer), n >= 1, n <= toInteger (maxBound :: Word32) = Right (fromInteger n)
  | otherwise = Left ("http_req: HTTP_REQ_WINDOW='" ++ w ++ "' is not a positive integer")
