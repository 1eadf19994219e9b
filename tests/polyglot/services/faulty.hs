{-# LANGUAGE OverloadedStrings #-}
-- | Faulty service (ghc -main-is Faulty): /tests/faulty/haskell/boom throws, /ok answers "ok".
module Faulty (main) where

import Control.Exception (Exception, throwIO)

import Cumulo

newtype FaultyError = FaultyError String deriving (Show)

instance Exception FaultyError

main :: IO ()
main = run $ \api -> do
  subscribe api "boom" (\_ _ -> throwIO (FaultyError "boom from haskell"))
  subscribe api "ok" (\_ _ -> pure ("", "ok"))
