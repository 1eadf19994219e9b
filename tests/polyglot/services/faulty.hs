{-# LANGUAGE OverloadedStrings #-}
-- | Faulty service (ghc -main-is Faulty): /tests/faulty/haskell/boom throws, /ok answers "ok".
-- trace_sync, trace_async, trace_mcast, trace_forward call /echo/trace with an
-- empty request_info and answer what it got (PROTOCOL.md 5.1: the handler's
-- calls carry its request's trace context).
module Faulty (main) where

import Control.Exception (Exception, throwIO)

import Cumulo

newtype FaultyError = FaultyError String deriving (Show)

instance Exception FaultyError

main :: IO ()
main = run $ \api -> do
  subscribe api "boom" (\_ _ -> throwIO (FaultyError "boom from haskell"))
  subscribe api "ok" (\_ _ -> pure ("", "ok"))
  subscribe api "trace_sync" $ \a _ -> do
    (info, _) <- sendSync a "/echo/trace" ""
    pure ("", info)
  subscribe api "trace_async" $ \a _ -> do
    tid <- sendAsync a "/echo/trace" ""
    echoed <- recvAsync a (Just tid) Nothing
    pure ("", answerInfo echoed)
  subscribe api "trace_mcast" $ \a _ -> do
    tids <- mcastAsync a "/echo/trace" ""
    case tids of
      tid : _ -> do
        echoed <- recvAsync a (Just tid) Nothing
        pure ("", answerInfo echoed)
      [] -> throwIO (FaultyError "no copy sent")
  subscribe api "trace_forward" $ \a req -> do
    forward a req "/echo/trace" "" (requestBody req) Nothing Nothing
    pure ("", "")
