-- | The cumulo SDK for Haskell: one 'API' is one instance, a connection to
-- the core speaking protocol v1 (proto/PROTOCOL.md); the calls are those of
-- docs/SDK_GUIDE.md.
--
-- > import qualified Data.ByteString.Char8 as B
-- > import Cumulo
-- > main = run $ \api -> subscribe api "hello" (\_ req -> pure ("", B.append (B.pack "hello ") (requestBody req)))
module Cumulo
  ( -- * Instances
    API
  , Config (..)
  , defaultConfig
  , connect
  , connectUnmanaged
  , connectWith
  , withAPI
  , close
  , run
  , runWith
    -- * Serving
  , Handler
  , Request (..)
  , subscribe
  , unsubscribe
  , subscribeCount
  , poll
  , forward
    -- * Sending
  , SendOptions (..)
  , defaultSend
  , TransId (..)
  , Answer (..)
  , sendAsync
  , sendAsyncWith
  , sendSync
  , sendSyncWith
  , mcastAsync
  , mcastAsyncWith
  , recvAsync
    -- * Accessors
  , processIndex
  , processCount
  , threadCount
  , threadIndex
  , prefix
  , timeoutAsync
  , timeoutSync
  , timeoutTerminate
  , priorityDefault
  , nodeId
  , instanceId
  , window
  , maxFrame
  , keepalive
    -- * Key/value (request_info, response_info)
  , infoEncode
  , infoParse
  , infoLookup
    -- * Errors
  , Status
  , statusName
  , CumuloError (..)
  , ConnectionClosed (..)
  , statusOk, statusTimeout, statusNoService, statusQueueFull, statusCrashed
  , statusMalformed, statusShuttingDown, statusServiceError, statusTooLarge
  , statusInvalidArgument, statusUnsupportedVersion, statusUnauthorized, statusProtocol
  , statusUnavailable
  ) where

import Cumulo.API
import Cumulo.Codec
import Cumulo.Info
import Cumulo.Status
